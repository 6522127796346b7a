package dev.kvflux.bindings;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** What an engine written outside the bindings gets from {@link TransferEngine#moriWaitAll}. */
class TransferEngineTest {
    private final VirtualTimeScheduler time = VirtualTimeScheduler.create();
    private final List<Long> sleeps = new ArrayList<>();
    private final TransferEngine.WaitClock clock = new TransferEngine.WaitClock() {
        @Override
        public long nanoTime() {
            return time.now(TimeUnit.NANOSECONDS);
        }

        @Override
        public boolean sleepUntil(long deadlineNanos) {
            sleeps.add(deadlineNanos);
            time.advanceTimeBy(Duration.ofNanos(Math.max(0, deadlineNanos - nanoTime())));
            return true;
        }
    };

    @Test
    void aBoundedWaitOnAStatusInFlightSleepsOnTheEnginesClockToItsDeadline() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));

        assertThat(TransferEngine.moriWaitAll(List.of(status), 3000, clock)).isEqualTo(StatusCode.SUCCESS);

        assertThat(sleeps).containsExactly(Duration.ofSeconds(3).toNanos());
    }

    @Test
    void anUnboundedWaitSleepsAMillisecondOfTheClockBetweenQueries() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(3));

        assertThat(TransferEngine.moriWaitAll(List.of(status), -1, clock)).isEqualTo(StatusCode.SUCCESS);

        assertThat(sleeps).hasSize(3);
        assertThat(time.now(TimeUnit.MILLISECONDS)).isEqualTo(3);
    }

    @Test
    void aZeroTimeoutPollsOnceAndNeverSleeps() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(3));

        assertThat(TransferEngine.moriWaitAll(List.of(status), 0, clock)).isEqualTo(StatusCode.IN_PROGRESS);

        assertThat(sleeps).isEmpty();
    }
}
