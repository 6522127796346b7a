package dev.kvflux.serving.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.http.BodyCheck;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * A completion body read as it arrives is refused as soon as it goes past the bounds of the whole body's parse, long
 * before a 16 MiB body has arrived; a body within them, or one that is not JSON, goes through to that parse untouched.
 */
class ArrivingCompletionTest {
    private static final int MODEL_LEN = CompletionSchema.DEFAULT_MAX_MODEL_LEN;
    private static final int CHUNK = 64 << 10;

    /** Feeds {@code head}, then chunks of {@code filler} up to 16 MiB; the bytes fed when refused, or -1. */
    private static long refusedAfter(BodyCheck check, String head, byte filler, byte separator) {
        byte[] chunk = new byte[CHUNK];
        Arrays.fill(chunk, filler);
        for (int i = 1; i < chunk.length; i += 2) {
            chunk[i] = separator;
        }
        long fed = 0;
        try (check) {
            check.next(ByteBuffer.wrap(head.getBytes(StandardCharsets.UTF_8)));
            fed += head.length();
            while (fed < 16 << 20) {
                check.next(ByteBuffer.wrap(chunk));
                fed += chunk.length;
            }
            return -1;
        } catch (BodyCheck.Refused refused) {
            assertThat(refused.status().code()).isEqualTo(400);
            assertThat(refused.code()).isEqualTo("context_length_exceeded");
            assertThat(refused.getMessage()).contains("far over the model length of " + MODEL_LEN);
            return fed;
        }
    }

    @Test
    void aPromptOfWordsFarOverTheModelLengthIsRefusedAfterAboutTwoMebibytes() {
        long fed = refusedAfter(CompletionSchema.arriving(MODEL_LEN), "{\"prompt\": \"", (byte) 'w', (byte) ' ');

        assertThat(fed).isBetween(2L << 20, 3L << 20);
    }

    @Test
    void aPromptOfTokenIdsFarOverTheModelLengthIsRefusedWithinHalfAMebibyte() {
        long fed = refusedAfter(CompletionSchema.arriving(MODEL_LEN), "{\"prompt\": [", (byte) '7', (byte) ',');

        assertThat(fed).isPositive().isLessThan(512 << 10);
    }

    @Test
    void aBodyWithinTheBoundsIsNotRefusedWhateverTheChunksItArrivesIn() {
        byte[] body = ("{\"prompt\": \"" + "word ".repeat(30_000) + "\", \"max_tokens\": 16, \"stream\": true}")
                .getBytes(StandardCharsets.UTF_8);
        try (BodyCheck check = CompletionSchema.arriving(MODEL_LEN)) {
            for (int at = 0; at < body.length; at += 7_001) {
                check.next(ByteBuffer.wrap(body, at, Math.min(7_001, body.length - at)));
            }
        }
        assertThat(CompletionSchema.parse(new String(body, StandardCharsets.UTF_8), MODEL_LEN).get("max_tokens")
                .asInt()).isEqualTo(16);
    }

    @Test
    void aBodyThatIsNotJsonIsLeftToTheWholeParseToName() {
        BodyCheck check = CompletionSchema.arriving(MODEL_LEN);

        check.next(ByteBuffer.wrap("{\"prompt\": nope".getBytes(StandardCharsets.UTF_8)));
        long fed = refusedAfter(check, "", (byte) 'w', (byte) ' ');

        assertThat(fed).as("never refused for its length once it was not JSON").isEqualTo(-1);
        assertThatThrownBy(() -> CompletionSchema.parse("{\"prompt\": nope", MODEL_LEN))
                .hasMessageContaining("not JSON");
    }
}
