package dev.kvflux.serving.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

class PrometheusTextTest {
    private static final String TEXT = """
            # HELP kvflux_blocks KV blocks per state
            # TYPE kvflux_blocks gauge
            kvflux_blocks{role="decode",state="free"} 1000.0
            kvflux_blocks{role="decode",state="writing"} 24.0

            kvflux_prefill_requests_total{role="prefill"} 7.0
            odd{a="x\\"y\\\\z",b="line\\nbreak"} +Inf
            bare 3 1712345678000
            """;

    @Test
    void samplesAreReadWithTheirLabelsAndCommentsAreSkipped() {
        PrometheusText text = PrometheusText.parse(TEXT);

        assertThat(text.samples()).hasSize(5);
        assertThat(text.samples().get(0)).isEqualTo(new PrometheusText.Sample("kvflux_blocks",
                Map.of("role", "decode", "state", "free"), 1000.0));
        assertThat(text.samples().get(3).labels()).containsEntry("a", "x\"y\\z").containsEntry("b", "line\nbreak");
        assertThat(text.samples().get(3).value()).isInfinite();
        assertThat(text.count("bare")).as("a timestamp after the value is not the value").isEqualTo(3);
    }

    @Test
    void sumAddsTheSamplesWhoseLabelsMatch() {
        PrometheusText text = PrometheusText.parse(TEXT);

        assertThat(text.count("kvflux_blocks")).isEqualTo(1024);
        assertThat(text.count("kvflux_blocks", "state", "writing")).isEqualTo(24);
        assertThat(text.count("kvflux_blocks", "state", "quarantined")).isZero();
        assertThat(text.has("kvflux_prefill_requests_total")).isTrue();
        assertThat(text.has("kvflux_prefill_requests")).isFalse();
    }

    @Test
    void aLineThatIsNotASampleIsRefusedNamingIt() {
        assertThatThrownBy(() -> PrometheusText.parse("{\"kv_blocks\": {}}"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kv_blocks");
        assertThatThrownBy(() -> PrometheusText.parse("name{a=\"unterminated} 1"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unterminated");
        assertThatThrownBy(() -> PrometheusText.parse("name not-a-number"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a number");
    }
}
