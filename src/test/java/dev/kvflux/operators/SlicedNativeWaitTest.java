package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;
import reactor.test.scheduler.VirtualTimeScheduler;

class SlicedNativeWaitTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final RecordingEngine engine = new RecordingEngine(clock);

    /** The wait's loop on the test thread; the recording engine advances the clock as it "sleeps". */
    private SlicedNativeWait wait(SlicedNativeWait w) {
        return w.scheduler(Schedulers.immediate()).clock(clock);
    }

    /** Runs the wait to its end and returns the error (or null) and the virtual time it ended at. */
    private Object[] run(SlicedNativeWait w, List<? extends TransferStatus> statuses) {
        try {
            w.await(statuses).block();
            return new Object[] {null, Duration.ofNanos(clock.now(TimeUnit.NANOSECONDS))};
        } catch (TransferException e) {
            return new Object[] {e, Duration.ofNanos(clock.now(TimeUnit.NANOSECONDS))};
        }
    }

    @Test
    void neverCallsWaitAllWithMoreThanTheSlice() {
        List<TransferStatus> statuses = List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(197)),
                ScriptedStatus.never(clock));

        run(wait(SlicedNativeWait.failFast(engine, Duration.ofMillis(335))), statuses);

        assertThat(engine.timeouts).hasSizeGreaterThan(30).allSatisfy(ms -> assertThat(ms).isBetween(1L, 10L));
    }

    @Test
    void completesWithinOneSliceOfTheLastCompletion() {
        Object[] end = run(wait(SlicedNativeWait.failFast(engine, TIMEOUT)), List.of(
                ScriptedStatus.succeedsAt(clock, Duration.ofMillis(93)),
                ScriptedStatus.succeedsAt(clock, Duration.ofMillis(205))));

        assertThat(end[0]).isNull();
        assertThat((Duration) end[1]).isBetween(Duration.ofMillis(205), Duration.ofMillis(215));
    }

    @Test
    void failFastErrorsWithinOneSliceOfAFailure() {
        Object[] end = run(wait(SlicedNativeWait.failFast(engine, TIMEOUT)), List.of(ScriptedStatus.never(clock),
                ScriptedStatus.failsAt(clock, Duration.ofMillis(42), StatusCode.ERR_GPU_OP, "copy died")));

        assertThat((Throwable) end[0]).hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy died");
        assertThat((Duration) end[1]).isBetween(Duration.ofMillis(42), Duration.ofMillis(52));
    }

    @Test
    void drainErrorsOnceNothingIsInFlightAndNotBefore() {
        Object[] end = run(wait(SlicedNativeWait.drain(engine, TIMEOUT)), List.of(
                ScriptedStatus.failsAt(clock, Duration.ofMillis(20), StatusCode.ERR_RDMA_OP, "nic"),
                ScriptedStatus.succeedsAt(clock, Duration.ofMillis(500))));

        assertThat(((TransferException) end[0]).code()).isEqualTo(StatusCode.ERR_RDMA_OP);
        assertThat((Duration) end[1]).isBetween(Duration.ofMillis(500), Duration.ofMillis(510));
    }

    @Test
    void theTimeoutFiresAtTransferTimeoutWithMoriiosTimeoutMessage() {
        Object[] end = run(wait(SlicedNativeWait.failFast(engine, TIMEOUT)), List.of(ScriptedStatus.never(clock)));

        assertThat((Throwable) end[0]).hasMessage(
                "MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s");
        assertThat((Duration) end[1]).isEqualTo(TIMEOUT);
    }

    @Test
    void itsBlockingCallsRunOnABoundedElasticThreadByDefault() {
        SlicedNativeWait.failFast(engine, TIMEOUT).clock(clock)
                .await(List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(25)))).block(Duration.ofSeconds(5));

        assertThat(engine.threads).isNotEmpty().allSatisfy(name -> assertThat(name).startsWith("boundedElastic"));
    }
}
