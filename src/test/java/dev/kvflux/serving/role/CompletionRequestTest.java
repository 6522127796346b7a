package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.transfer.notify.NotifyCodec;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.api.Role;
import org.junit.jupiter.api.Test;

/** What decode and prefill accept as a completion request, and what they refuse with a clear error. */
class CompletionRequestTest {
    private static final String PARAMS =
            "\"kv_transfer_params\": {\"transfer_id\": \"t-1\", \"remote_notify\": \"127.0.0.1:7001\"}";

    private static CompletionRequest parse(String fields) {
        ObjectNode json = HttpJson.object("{" + fields + ", " + PARAMS + "}");
        return CompletionRequest.parse(json, Role.DECODE);
    }

    @Test
    void stringPromptCountsWordsAndListPromptCountsTokenIds() {
        assertThat(parse("\"prompt\": \" a b  c \"").promptTokens()).isEqualTo(3);
        assertThat(parse("\"prompt\": [1, 2, 3, 4]").promptTokens()).isEqualTo(4);
    }

    @Test
    void listPromptWithANonTokenItemIsRefusedNamingTheItem() {
        assertThatThrownBy(() -> parse("\"prompt\": [1, \"two\"]"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("item 1 (\"two\")");
    }

    @Test
    void fractionalMaxTokensIsRefused() {
        assertThatThrownBy(() -> parse("\"prompt\": \"a\", \"max_tokens\": 2.5"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max_tokens must be an integer");
    }

    @Test
    void transferIdLongerThanANotifyFrameMayCarryIsRefused() {
        // decode rejects a notify frame whose transfer_id is over the codec's limit, closing the pooled
        // connection every retry of it shares with other transfers' notices; refuse such a request up front
        String id = "x".repeat(NotifyCodec.MAX_ID_BYTES + 1);
        ObjectNode json = HttpJson.object("{\"prompt\": \"a b\", \"kv_transfer_params\": {\"transfer_id\": \"" + id
                + "\", \"remote_notify\": \"127.0.0.1:7001\"}}");
        assertThatThrownBy(() -> CompletionRequest.parse(json, Role.PREFILL))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("kv_transfer_params.transfer_id is 257 bytes");
        ObjectNode longest = HttpJson.object("{\"prompt\": \"a b\", \"kv_transfer_params\": {\"transfer_id\": \""
                + id.substring(1) + "\", \"remote_notify\": \"127.0.0.1:7001\"}}");
        assertThat(CompletionRequest.parse(longest, Role.PREFILL).params().transferId()).hasSize(NotifyCodec.MAX_ID_BYTES);
    }

    @Test
    void streamThatIsNotABooleanIsRefused() {
        assertThatThrownBy(() -> parse("\"prompt\": \"a\", \"stream\": \"yes\""))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("stream must be true or false");
    }
}
