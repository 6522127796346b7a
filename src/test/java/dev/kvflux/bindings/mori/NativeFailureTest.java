package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import dev.kvflux.testing.NoLiveSimHandles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Failures injected in the native simulator, seen through FFM by kvflux's wait and by MoRI's own. */
@ExtendWith(NoLiveSimHandles.class)
class NativeFailureTest {
    private static final long BLOCK = 4096;
    private static final Duration PER_BATCH = Duration.ofMillis(20);
    private static final int BATCHES = 10;
    private static final String REASON = "XGMI: hipEventQuery failed: injected";

    /** Posts one-block batches that finish PER_BATCH apart, the third one failing. */
    private static List<MoriStatus> postWithThirdFailing(SimPair pair) {
        pair.sim.setTiming(pair.p.engine(), PER_BATCH, Long.MAX_VALUE);
        pair.sim.failNth(pair.p.engine(), 3, StatusCode.ERR_GPU_OP, REASON);
        List<MoriStatus> statuses = new ArrayList<>();
        for (int i = 0; i < BATCHES; i++) {
            BatchPlan plan = BatchPlan.mirrored(new long[] {i * BLOCK}, BLOCK);
            statuses.add((MoriStatus) pair.session.batchWrite(plan, pair.session.allocateTransferUid()));
        }
        return statuses;
    }

    @Test
    void failFastErrorsWithTheNativeFailureWhileLaterCopiesAreStillInFlight() {
        try (SimPair pair = new SimPair("fail-fast", BATCHES * BLOCK)) {
            // the last copy never ends, so it is still in flight whenever the wait sees the failure, however busy
            // the machine (a claim on how early it sees it would be a timing figure, not this test's)
            pair.sim.hangNth(pair.p.engine(), BATCHES);
            List<MoriStatus> statuses = postWithThirdFailing(pair);
            TransferException error = catchThrowableOfType(TransferException.class,
                    () -> CompletionWait.failFast(Duration.ofSeconds(30)).await(statuses).block());

            assertThat(error.code()).isEqualTo(StatusCode.ERR_GPU_OP);
            assertThat(error.reason()).isEqualTo(REASON);
            assertThat(error.isTimeout()).as("it did not wait for the copy still in flight").isFalse();
            assertThat(statuses.getLast().code()).isEqualTo(StatusCode.IN_PROGRESS);
        }
    }

    @Test
    void drainErrorsWithTheNativeFailureOnlyOnceNoCopyIsInFlight() {
        try (SimPair pair = new SimPair("drain", BATCHES * BLOCK)) {
            List<MoriStatus> statuses = postWithThirdFailing(pair);
            TransferException error = catchThrowableOfType(TransferException.class,
                    () -> CompletionWait.drain(Duration.ofSeconds(2)).await(statuses).block());
            long erroredAt = pair.sim.nowNanos();

            assertThat(error.code()).isEqualTo(StatusCode.ERR_GPU_OP);
            assertThat(error.reason()).isEqualTo(REASON);
            assertThat(erroredAt).isGreaterThanOrEqualTo(pair.sim.finishNanos(statuses.getLast()));
        }
    }

    @Test
    void nativeWaitAllReturnsTheFailureRatherThanInProgress() {
        try (SimPair pair = new SimPair("native-failure", 2 * BLOCK)) {
            pair.sim.failNth(pair.p.engine(), 1, StatusCode.ERR_BAD_STATE, "injected");
            pair.sim.hangNth(pair.p.engine(), 2);
            List<MoriStatus> statuses = List.of(
                    (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, BLOCK), 1),
                    (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {BLOCK}, BLOCK), 2));

            assertThat(pair.p.waitAll(statuses, 100)).isEqualTo(StatusCode.ERR_BAD_STATE);
            assertThat(pair.p.waitAll(statuses, 0)).isEqualTo(StatusCode.ERR_BAD_STATE);
            assertThat(statuses.getLast().code()).isEqualTo(StatusCode.IN_PROGRESS);
        }
    }

    @Test
    void aStatusThatNeverCompletesTimesTheReactiveWaitOut() {
        try (SimPair pair = new SimPair("hang", BLOCK)) {
            pair.sim.hangNth(pair.p.engine(), 1);
            MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(new long[] {0}, BLOCK), 1);
            TransferException error = catchThrowableOfType(TransferException.class,
                    () -> CompletionWait.failFast(Duration.ofMillis(200)).await(List.of(status)).block());

            assertThat(error.isTimeout()).isTrue();
            assertThat(error.getMessage()).isEqualTo(
                    "MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 0.2s");
        }
    }
}
