package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class StallClockTest {
    private static final long MS = 1_000_000L;

    @Test
    void aClockCountsIdleTimeFromItsStartUntilProgressIsSeen() {
        StallClock clock = new StallClock(Duration.ofMillis(100), 50 * MS);

        assertThat(clock.idleFor(120 * MS)).isEqualTo(70 * MS);
        assertThat(new boolean[] {clock.stalledAt(149 * MS), clock.stalledAt(150 * MS)}).containsExactly(false, true);
    }

    @Test
    void progressStartsTheIdleTimeAgain() {
        StallClock clock = new StallClock(Duration.ofMillis(100), 0);
        clock.progressAt(90 * MS);

        assertThat(clock.untilStall(150 * MS)).isEqualTo(40 * MS);
        assertThat(clock.untilStall(190 * MS)).as("the stall time after the progress").isZero();
    }

    @Test
    void theStallTimeIsKeptForTheStallError() {
        StallClock clock = new StallClock(Duration.ofSeconds(5), 0);

        assertThat(clock.stallAfter()).isEqualTo(Duration.ofSeconds(5));
        assertThat(clock.stallAfterNanos()).isEqualTo(5_000 * MS);
    }
}
