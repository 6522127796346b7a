package dev.kvflux.bindings;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class DurationTextTest {

    @ParameterizedTest(name = "{0}s {1}ns prints as {2}")
    @CsvSource({
        "30, 0, 30s",
        "1, 500000000, 1.5s",
        "120, 0, 120s",
        "1, 1, 1.000000001s",
        "34560000, 0, 34560000s",
        "9223372036854775807, 999999999, 9223372036854775807.999999999s",
    })
    void aSecondOrMorePrintsInSecondsWithTheFractionItNeeds(long seconds, long nanos, String text) {
        assertThat(DurationText.of(Duration.ofSeconds(seconds, nanos))).isEqualTo(text);
    }

    @ParameterizedTest(name = "{0}ns prints as {1}")
    @CsvSource({
        "10000000, 10ms",
        "200000000, 200ms",
        "1500000, 1.5ms",
        "500000, 500us",
        "12500, 12.5us",
        "40, 40ns",
    })
    void underASecondPrintsInTheLargestUnitItHoldsWhole(long nanos, String text) {
        assertThat(DurationText.of(Duration.ofNanos(nanos))).isEqualTo(text);
    }

    @ParameterizedTest(name = "{0}ns prints as {1}")
    @CsvSource({"0, 0s", "-1000000000, -1s", "-5000000, -5ms"})
    void zeroIsZeroSecondsAndANegativeDurationKeepsItsSign(long nanos, String text) {
        assertThat(DurationText.of(Duration.ofNanos(nanos))).isEqualTo(text);
    }
}
