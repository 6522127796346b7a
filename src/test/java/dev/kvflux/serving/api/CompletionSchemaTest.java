package dev.kvflux.serving.api;

import dev.kvflux.serving.http.HttpJson;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;

/** The completion requests the proxy lets through, and the message for each it refuses. */
class CompletionSchemaTest {

    private static ObjectNode check(String json) {
        return CompletionSchema.check(HttpJson.object(json));
    }

    private static void refused(String json, String... message) {
        assertThatThrownBy(() -> check(json)).isInstanceOf(IllegalArgumentException.class)
                .message().contains(message);
    }

    @Test
    void aTypicalRequestPassesUnchanged() {
        String json = "{\"model\": \"m\", \"prompt\": \"a b\", \"max_tokens\": 16, \"stream\": true, \"temperature\": 0.7,"
                + " \"top_p\": 1, \"n\": 1, \"stop\": [\"\\n\"], \"seed\": 3, \"logit_bias\": {\"50256\": -100},"
                + " \"stream_options\": {\"include_usage\": true}, \"ignore_eos\": true}";

        assertThat(check(json)).isEqualTo(HttpJson.object(json));
    }

    @Test
    void promptsOfTokenIdsAndOneItemListsPass() {
        assertThat(check("{\"prompt\": [1, 2, 3]}").get("prompt").size()).isEqualTo(3);
        assertThat(check("{\"prompt\": [\"a b\"]}").get("prompt").asText()).isEqualTo("a b");
        assertThat(check("{\"prompt\": [[7, 8]]}").get("prompt").size()).isEqualTo(2);
    }

    @Test
    void aPromptOfAnotherShapeIsRefusedNamingWhatItIs() {
        refused("{\"prompt\": 5}", "prompt must be a string or a list of token ids, got number");
        refused("{}", "prompt must be a string or a list of token ids, got none");
        refused("{\"prompt\": \"   \"}", "prompt has 0 tokens");
        refused("{\"prompt\": []}", "prompt has 0 tokens");
        refused("{\"prompt\": [1, -2]}", "item 1 (-2) is not a token id");
        refused("{\"prompt\": [\"a\", \"b\"]}", "batch of 2 prompts", "one prompt per request");
    }

    @Test
    void fieldsOutsideTheirRangeAreRefusedNamingTheField() {
        refused("{\"prompt\": \"a\", \"max_tokens\": 0}", "max_tokens must be an integer from 1 to 65536, got 0");
        refused("{\"prompt\": \"a\", \"max_tokens\": 1.5}", "max_tokens");
        refused("{\"prompt\": \"a\", \"stream\": \"yes\"}", "stream must be true or false");
        refused("{\"prompt\": \"a\", \"model\": 3}", "model must be a string");
        refused("{\"prompt\": \"a\", \"temperature\": 3}", "temperature must be a number from 0 to 2");
        refused("{\"prompt\": \"a\", \"n\": 2}", "n must be 1", "one choice per request");
        refused("{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop must be a string or a list of up to 4");
        refused("{\"prompt\": \"a\", \"logit_bias\": {\"1\": 200}}", "logit_bias values");
        refused("{\"prompt\": \"a\", \"stream_options\": {}}", "stream_options is allowed only with");
    }

    @Test
    void aRefusalNeverEchoesAHugeValue() {
        String huge = "9".repeat(100_000);

        assertThatThrownBy(() -> check("{\"prompt\": \"a\", \"max_tokens\": " + huge + "}"))
                .message().hasSizeLessThan(200);
    }

    @Test
    void nullStandsForAbsent() {
        assertThat(check("{\"prompt\": \"a\", \"max_tokens\": null, \"stream\": null, \"stop\": null}")).isNotNull();
        assertThat(CompletionSchema.maxTokens(HttpJson.object("{\"max_tokens\": null}")))
                .isEqualTo(CompletionSchema.DEFAULT_MAX_TOKENS);
    }

    @Test
    void aBodyFarOverTheModelLengthIsRefusedWhileItIsRead() {
        // at most 64 characters a token (and 64 Ki) and 4 values a token (and 4,096): for 1,000 tokens a string of
        // 70,000 characters is far over; for 100 tokens, 5,000 values are
        String longString = "{\"prompt\": \"" + "w".repeat(70_000) + "\"}";
        String manyValues = "{\"prompt\": [" + "1,".repeat(5_000) + "1]}";

        assertThatThrownBy(() -> CompletionSchema.parse(longString, 1_000))
                .isInstanceOf(CompletionSchema.ModelLengthException.class).hasMessageContaining("far over the model"
                        + " length of 1000 tokens");
        assertThatThrownBy(() -> CompletionSchema.parse(manyValues, 100))
                .isInstanceOf(CompletionSchema.ModelLengthException.class);
        assertThat(CompletionSchema.parse("{\"prompt\": [" + "1,".repeat(99) + "1]}", 100).get("prompt").size())
                .as("a prompt at the model length").isEqualTo(100);
    }
}
