package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** MoRI's WaitAll over statuses that complete only when queried, on a virtual clock. */
class MoriWaitAllTest {
    private final VirtualTimeScheduler time = VirtualTimeScheduler.create();
    private final MoriWaitAll waitAll = new MoriWaitAll(new MoriWaitAll.Clock() {
        @Override
        public long nanoTime() {
            return time.now(TimeUnit.NANOSECONDS);
        }

        @Override
        public boolean sleepUntil(long deadlineNanos) {
            long now = time.now(TimeUnit.NANOSECONDS);
            if (deadlineNanos > now) {
                time.advanceTimeBy(Duration.ofNanos(deadlineNanos - now));
            }
            return true;
        }
    });

    private long elapsedMs() {
        return time.now(TimeUnit.MILLISECONDS);
    }

    @Test
    void aCopyStillRunningAtTheFirstPollCostsTheWholeTimeout() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        assertThat(waitAll.waitAll(List.of(status), 3000)).isEqualTo(StatusCode.SUCCESS);
        assertThat(elapsedMs()).isEqualTo(3000);
        assertThat(status.queries()).isEqualTo(2);
    }

    @Test
    void copiesDoneAtTheFirstPollReturnAtOnce() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ZERO);
        assertThat(waitAll.waitAll(List.of(status), 3000)).isEqualTo(StatusCode.SUCCESS);
        assertThat(elapsedMs()).isZero();
    }

    @Test
    void laterStatusesArePolledOnceAtTheDeadline() {
        ScriptedStatus first = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        ScriptedStatus second = ScriptedStatus.succeedsAt(time, Duration.ofMillis(6));
        assertThat(waitAll.waitAll(List.of(first, second), 3000)).isEqualTo(StatusCode.SUCCESS);
        assertThat(elapsedMs()).isEqualTo(3000);
        assertThat(second.queries()).isEqualTo(1);
    }

    @Test
    void aStatusStillInFlightAtTheDeadlineIsInProgress() {
        assertThat(waitAll.waitAll(List.of(ScriptedStatus.never(time)), 3000)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(elapsedMs()).isEqualTo(3000);
    }

    @Test
    void aFailureTakesPrecedenceOverAStatusInFlightAtTheDeadline() {
        ScriptedStatus stuck = ScriptedStatus.never(time);
        ScriptedStatus failed = ScriptedStatus.failsAt(time, Duration.ZERO, StatusCode.ERR_GPU_OP, "copy failed");
        assertThat(waitAll.waitAll(List.of(stuck, failed), 3000)).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aZeroTimeoutPollsEachStatusOnce() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        assertThat(waitAll.waitAll(List.of(status), 0)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(status.queries()).isEqualTo(1);
        assertThat(elapsedMs()).isZero();
    }

    @Test
    void anUnboundedWaitReturnsWhenTheStatusCompletes() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        assertThat(waitAll.waitAll(List.of(status), -1)).isEqualTo(StatusCode.SUCCESS);
        assertThat(elapsedMs()).isBetween(5L, 6L);
    }

    @Test
    void aStatusNeverPostedIsAnError() {
        assertThat(waitAll.waitAll(List.of(ScriptedStatus.initUntil(time, Duration.ofMillis(5))), 3000))
                .isEqualTo(StatusCode.ERR_BAD_STATE);
    }

    @Test
    void anEmptyListSucceeds() {
        assertThat(waitAll.waitAll(List.of(), 3000)).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void anInterruptedWaitReturnsInProgressAtOnceInsteadOfSpinningToItsDeadline() {
        MoriWaitAll system = new MoriWaitAll(MoriWaitAll.Clock.SYSTEM);
        StatusCode[] bounded = new StatusCode[1];
        StatusCode[] unbounded = new StatusCode[1];

        assertTimeoutPreemptively(Duration.ofSeconds(5), () -> {
            Thread.currentThread().interrupt();
            bounded[0] = system.waitAll(List.of(ScriptedStatus.never(time)), 60_000);
            unbounded[0] = system.waitAll(List.of(ScriptedStatus.never(time)), -1);
            assertThat(Thread.interrupted()).as("the interrupt flag is kept").isTrue();
        });

        assertThat(bounded[0]).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(unbounded[0]).isEqualTo(StatusCode.IN_PROGRESS);
    }
}
