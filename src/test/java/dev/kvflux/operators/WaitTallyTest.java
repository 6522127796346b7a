package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.RecordingWaitRecorder.Ended;
import dev.kvflux.testing.RecordingWaitRecorder.Polled;
import dev.kvflux.testing.RecordingWaitRecorder;
import dev.kvflux.testing.ScriptedStatus;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

class WaitTallyTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final RecordingWaitRecorder recorder = new RecordingWaitRecorder();

    @Test
    void pollsAndQueriesAreCountedAsTheyComeAndReportedOnceAtTheEndInTheRecordersOrder() {
        WaitTally tally = new WaitTally(recorder, "reactive", clock);
        tally.started(3);
        tally.polled(3);
        clock.advanceTimeBy(Duration.ofMillis(10));
        tally.polled(3);
        tally.queried();
        tally.leftFlight(1);
        tally.failed(StatusCode.ERR_RDMA_OP);
        assertThat(recorder.polls).isEmpty();

        tally.ended(WaitOutcome.FAILED, 2);

        assertThat(recorder.order).containsExactly("started", "inFlight", "inFlight", "failed", "inFlight", "polls",
                "ended");
        assertThat(recorder.inFlightChanges).containsExactly(3, -1, -2);
        assertThat(recorder.polls).containsExactly(new Polled("reactive", 2, 7));
        assertThat(recorder.theEnd()).isEqualTo(new Ended("reactive", WaitOutcome.FAILED, Duration.ofMillis(10)));
    }

    @Test
    void aWaitsEndIsReportedTheFirstTimeOnly() {
        WaitTally tally = new WaitTally(recorder, "reactive-push", clock);
        tally.started(1);

        tally.ended(WaitOutcome.CANCELLED, 1);
        tally.ended(WaitOutcome.DONE, 0);

        assertThat(recorder.ended).extracting(Ended::outcome).containsExactly(WaitOutcome.CANCELLED);
    }

    @Test
    void theDetectionLagTakenWhenTheLastStatusSettledIsReportedWithADoneEnd() {
        WaitTally tally = new WaitTally(recorder, "reactive", clock);
        TransferStatus status = ScriptedStatus.succeedsAt(clock, Duration.ofMillis(5));
        tally.started(1);
        clock.advanceTimeBy(Duration.ofMillis(8));
        status.code();

        tally.lag(new TransferStatus[] {status});
        tally.ended(WaitOutcome.DONE, 0);

        assertThat(recorder.lags).containsExactly(Duration.ofMillis(3));
    }

    @Test
    void withoutARecorderNothingIsCountedOrReported() {
        WaitTally tally = new WaitTally(WaitRecorder.NOOP, "reactive", clock);
        tally.started(2);
        tally.polled(2);
        tally.ended(WaitOutcome.DONE, 0);

        assertThat(tally.recording()).isFalse();
    }

    @Test
    void neitherTheTallyNorTheStallClockTakesALock() {
        for (Class<?> type : new Class<?>[] {WaitTally.class, StallClock.class}) {
            assertThat(Arrays.stream(type.getDeclaredMethods()).map(Method::getModifiers))
                    .as(type.getSimpleName()).noneMatch(Modifier::isSynchronized);
            assertThat(Arrays.stream(type.getDeclaredFields()).map(f -> f.getType()))
                    .as(type.getSimpleName()).noneMatch(Lock.class::isAssignableFrom);
        }
    }
}
