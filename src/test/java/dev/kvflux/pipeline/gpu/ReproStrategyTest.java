package dev.kvflux.pipeline.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class ReproStrategyTest {

    @Test
    void strategiesAreNamedAsReportsPrintThem() {
        assertThat(ReproStrategy.named("sliced-native")).isEqualTo(ReproStrategy.SLICED_NATIVE);
        assertThat(ReproStrategy.named("reactive-push").push()).isTrue();
        assertThat(ReproStrategy.named("reactive").push()).isFalse();
    }

    @Test
    void anUnknownStrategySaysWhichExist() {
        assertThatThrownBy(() -> ReproStrategy.named("spin"))
                .hasMessageContaining("use native, sliced-native, reactive or reactive-push");
    }

    @Test
    void timeoutsParseAsTheSeedWritesThem() {
        assertThat(CudaRepro.Options.duration("30s")).isEqualTo(Duration.ofSeconds(30));
        assertThat(CudaRepro.Options.duration("500ms")).isEqualTo(Duration.ofMillis(500));
        assertThat(CudaRepro.Options.duration("2.5")).isEqualTo(Duration.ofMillis(2500));
    }

    @Test
    void theDefaultsAreTheSeedsGeometryAndTimeout() {
        CudaRepro.Options o = CudaRepro.Options.parse(new String[0]);
        assertThat(o.layout).isEqualTo(SeedLayout.SEED);
        assertThat(o.timeout).isEqualTo(Duration.ofSeconds(30));
        assertThat(o.strategies).containsExactly(ReproStrategy.values());
    }
}
