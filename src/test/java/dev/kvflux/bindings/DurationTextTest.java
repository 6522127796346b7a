package dev.kvflux.bindings;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class DurationTextTest {

    @Test
    void aSecondOrMorePrintsInSecondsWithTheFractionItNeeds() {
        assertThat(DurationText.of(Duration.ofSeconds(30))).isEqualTo("30s");
        assertThat(DurationText.of(Duration.ofMillis(1500))).isEqualTo("1.5s");
        assertThat(DurationText.of(Duration.ofMinutes(2))).isEqualTo("120s");
        assertThat(DurationText.of(Duration.ofSeconds(1, 1))).isEqualTo("1.000000001s");
    }

    @Test
    void underASecondPrintsInTheLargestUnitItHoldsWhole() {
        assertThat(DurationText.of(Duration.ofMillis(10))).isEqualTo("10ms");
        assertThat(DurationText.of(Duration.ofMillis(5))).isEqualTo("5ms");
        assertThat(DurationText.of(Duration.ofMillis(200))).isEqualTo("200ms");
        assertThat(DurationText.of(Duration.ofNanos(1_500_000))).isEqualTo("1.5ms");
        assertThat(DurationText.of(Duration.ofNanos(500_000))).isEqualTo("500us");
        assertThat(DurationText.of(Duration.ofNanos(12_500))).isEqualTo("12.5us");
        assertThat(DurationText.of(Duration.ofNanos(40))).isEqualTo("40ns");
    }

    @Test
    void zeroIsZeroSecondsAndANegativeDurationKeepsItsSign() {
        assertThat(DurationText.of(Duration.ZERO)).isEqualTo("0s");
        assertThat(DurationText.of(Duration.ofSeconds(-1))).isEqualTo("-1s");
        assertThat(DurationText.of(Duration.ofMillis(-5))).isEqualTo("-5ms");
    }

    @Test
    void theLongestDurationsPrintWithoutOverflowing() {
        assertThat(DurationText.of(Duration.ofDays(400))).isEqualTo("34560000s");
        assertThat(DurationText.of(Duration.ofSeconds(Long.MAX_VALUE, 999_999_999)))
                .isEqualTo(Long.MAX_VALUE + ".999999999s");
    }
}
