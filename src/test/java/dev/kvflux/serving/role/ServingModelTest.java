package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The simulated model's time scale ({@code --model-time}). */
class ServingModelTest {
    private static final ServingModel BASE = ServingModel.DEEPSEEK_V2_LITE_MI355X;

    @Test
    void modelTimeZeroMakesEveryStepTheShortestAModelMayHave() {
        ServingModel free = BASE.withModelTime(0);
        assertThat(free.stepTime(BASE.maxBatchedTokens())).isEqualTo(Duration.ofNanos(1));
        assertThat(free.decodeStep()).isEqualTo(Duration.ofNanos(1));
        assertThat(free.layers()).isEqualTo(BASE.layers());
        assertThat(free.blockBytes()).as("the KV is as large: only the model's time goes").isEqualTo(BASE.blockBytes());
    }

    @Test
    void aFactorScalesPrefillAndDecodeStepsAndOneChangesNothing() {
        ServingModel half = BASE.withModelTime(0.5);
        assertThat(half.decodeStep()).isEqualTo(BASE.decodeStep().dividedBy(2));
        assertThat(half.stepTime(116_000)).isEqualTo(Duration.ofMillis(500));
        assertThat(BASE.withModelTime(1)).isSameAs(BASE);
    }

    @Test
    void aNegativeOrNonFiniteFactorIsRefusedSayingWhatItMeans() {
        for (double bad : new double[] {-1, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertThatThrownBy(() -> BASE.withModelTime(bad)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("0: steps cost nothing");
        }
    }
}
