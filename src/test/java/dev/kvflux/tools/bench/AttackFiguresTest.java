package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The arithmetic and the answer reading of {@code kvflux hostile}'s HTTP attacks; their figures come from the command. */
class AttackFiguresTest {

    @Test
    void percentilesAreByNearestRankAndSayMinusOneWithoutSamples() {
        List<Double> millis = List.of(5.0, 1.0, 4.0, 2.0, 3.0);
        assertThat(AttackFigures.percentile(millis, 0.5)).isEqualTo(3.0);
        assertThat(AttackFigures.percentile(millis, 0.99)).isEqualTo(5.0);
        assertThat(AttackFigures.percentile(millis, 1.0)).isEqualTo(5.0);
        assertThat(AttackFigures.percentile(List.of(), 0.5)).isEqualTo(-1);
    }

    @Test
    void sharesAndRatiosSayMinusOneWhenTheyCannotBeComputed() {
        assertThat(AttackFigures.percent(19, 20)).isEqualTo(95.0);
        assertThat(AttackFigures.percent(0, 0)).isEqualTo(-1);
        assertThat(AttackFigures.ratio(300, 100)).isEqualTo(3.0);
        assertThat(AttackFigures.ratio(-1, 100)).isEqualTo(-1);
        assertThat(AttackFigures.ratio(300, 0)).isEqualTo(-1);
        assertThat(AttackFigures.mib(1536)).isEqualTo(1.5);
    }

    @Test
    void anAnswerIsOkOnlyWhenItIsWhole() {
        assertThat(AttackFigures.outcome(200, "{\"choices\":[{\"text\":\" t0\"}]}", false)).isEqualTo("ok");
        assertThat(AttackFigures.outcome(200, "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true)).isEqualTo("ok");
        assertThat(AttackFigures.outcome(200, ": ok\n\n", true)).isEqualTo("truncated");
        assertThat(AttackFigures.outcome(200, "data: {\"error\":{\"code\":\"upstream_timeout\"}}\n\n", true))
                .isEqualTo("sse_error upstream_timeout");
        assertThat(AttackFigures.outcome(200, "not json", false)).isEqualTo("200 not_json");
    }

    @Test
    void aFailedAnswerIsItsStatusAndErrorCode() {
        assertThat(AttackFigures.outcome(503, "{\"error\":{\"message\":\"m\",\"type\":\"overloaded\","
                + "\"code\":\"kv_blocks_exhausted\"}}", false)).isEqualTo("503 kv_blocks_exhausted");
        assertThat(AttackFigures.outcome(502, "", true)).isEqualTo("502");
        assertThat(AttackFigures.counts(List.of("ok", "502", "ok"))).containsExactly(
                java.util.Map.entry("502", 1L), java.util.Map.entry("ok", 2L));
    }

    @Test
    void aRawAnswerIsReadFromItsStatusLineAndBody() {
        String raw = "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 38\r\n\r\n"
                + "{\"error\":{\"code\":\"bad_signature\"}}    ";
        assertThat(BodyFlood.whole(raw)).isTrue();
        assertThat(BodyFlood.whole(raw.substring(0, raw.length() - 5))).isFalse();
        assertThat(BodyFlood.outcome(raw)).isEqualTo("401 bad_signature");
        assertThat(BodyFlood.outcome("garbage")).isNull();
    }

    @Test
    void aBodyHasExactlyTheBytesAskedForAndIsJson() throws Exception {
        for (int bytes : new int[] {64, 65, 1000, 1001}) {
            byte[] body = BodyFlood.jsonBody(bytes);
            assertThat(body).hasSize(bytes);
            assertThat(dev.kvflux.serving.http.HttpJson.MAPPER.readTree(new String(body, StandardCharsets.US_ASCII))
                    .path("prompt").asText()).startsWith("w").endsWith("w").doesNotContain("  ");
        }
    }

    @Test
    void aSlowlorisHeadIsARequestLineThenHeadersForEver() {
        StringBuilder head = new StringBuilder();
        for (int i = 0; i < 200; i++) {
            head.append((char) Slowloris.headByte(i));
        }
        assertThat(head.toString()).startsWith("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .contains("X-Slow: 0123456789abcdef\r\nX-Slow: ").doesNotContain("\r\n\r\n");
    }
}
