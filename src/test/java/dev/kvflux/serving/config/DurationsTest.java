package dev.kvflux.serving.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class DurationsTest {

    @Test
    void wholeHoursPrintInHours() {
        assertThat(Durations.format(Duration.ofHours(25))).isEqualTo("25h");
    }

    @Test
    void wholeMinutesPrintInMinutes() {
        assertThat(Durations.format(Duration.ofMinutes(2))).isEqualTo("2m");
        assertThat(Durations.format(Duration.ofMinutes(90))).isEqualTo("90m");
    }

    @Test
    void secondsThatAreNotWholeMinutesPrintInSeconds() {
        assertThat(Durations.format(Duration.ofSeconds(90))).isEqualTo("90s");
    }

    @Test
    void subSecondDurationsPrintInMillisMicrosOrNanos() {
        assertThat(Durations.format(Duration.ofMillis(500))).isEqualTo("500ms");
        assertThat(Durations.format(Duration.ofNanos(12_500))).isEqualTo("12.5us");
        assertThat(Durations.format(Duration.ofNanos(40))).isEqualTo("40ns");
    }

    @Test
    void zeroPrintsAsZeroSeconds() {
        assertThat(Durations.format(Duration.ZERO)).isEqualTo("0s");
    }

    @Test
    void theExamplesReadBackToTheSameDuration() {
        for (Duration d : new Duration[] {Duration.ofHours(25), Duration.ofSeconds(90), Duration.ofMillis(1500),
                Duration.ofNanos(12_500), Duration.ofNanos(1), Duration.ofHours(24).plusNanos(1)}) {
            assertThat(Durations.parse(Durations.format(d))).as(Durations.format(d)).isEqualTo(d);
        }
    }

    @Property(tries = 500)
    void everyDurationTheParserCanHoldReadsBackToItself(@ForAll @LongRange(min = 0) long nanos) {
        Duration d = Duration.ofNanos(nanos);
        assertThat(Durations.parse(Durations.format(d))).isEqualTo(d);
    }

    @Property(tries = 200)
    void wholeSecondsReadBackToThemselves(@ForAll @LongRange(min = 0, max = 1_000_000_000L) long seconds) {
        Duration d = Duration.ofSeconds(seconds);
        assertThat(Durations.parse(Durations.format(d))).isEqualTo(d);
    }
}
