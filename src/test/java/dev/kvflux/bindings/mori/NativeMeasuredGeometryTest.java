package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.testing.NoLiveSimHandles;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * vLLM's MoRI-IO measurement through FFM on the native simulator: 118 layers × 128 blocks × 32 KiB, one
 * batch write per layer, block b of a layer at {@code layer * 8 MiB + 2 * b * 32 KiB} on both sides.
 * Real time, with claims that hold however busy the machine is: a bound the wait cannot beat (the whole timeout)
 * or one far from what it takes. How close to the last copy each wait ends is a figure, which
 * {@code kvflux repro --backend native-sim} prints.
 */
@ExtendWith(NoLiveSimHandles.class)
class NativeMeasuredGeometryTest {
    private static final int LAYERS = 118;
    private static final int BLOCKS = 128;
    private static final long BLOCK_BYTES = 32 * 1024;
    private static final long LAYER_BYTES = 2 * BLOCKS * BLOCK_BYTES;
    /** The native wait's timeout: it sits all of it out, so it is short. */
    private static final Duration TIMEOUT = Duration.ofSeconds(1);
    /** The reactive wait's timeout: long, so that a loaded machine's slow copies cannot reach it. */
    private static final Duration REACTIVE_TIMEOUT = Duration.ofSeconds(30);

    /**
     * Posts the request's 118 batch writes. The blocks' pages are touched first on both sides, as GPU
     * memory is resident, so the copies are not dominated by the host's first-touch page faults.
     */
    private static List<MoriStatus> postRequest(SimPair pair) {
        MemorySegment src = pair.p.buffer(pair.pRegion);
        MemorySegment dst = pair.d.buffer(pair.dRegion);
        List<MoriStatus> statuses = new ArrayList<>(LAYERS);
        for (int layer = 0; layer < LAYERS; layer++) {
            long[] offsets = new long[BLOCKS];
            for (int b = 0; b < BLOCKS; b++) {
                offsets[b] = layer * LAYER_BYTES + 2 * b * BLOCK_BYTES;
                src.asSlice(offsets[b], BLOCK_BYTES).fill((byte) layer);
                dst.asSlice(offsets[b], BLOCK_BYTES).fill((byte) 0);
            }
        }
        for (int layer = 0; layer < LAYERS; layer++) {
            long[] offsets = new long[BLOCKS];
            for (int b = 0; b < BLOCKS; b++) {
                offsets[b] = layer * LAYER_BYTES + 2 * b * BLOCK_BYTES;
            }
            long uid = pair.session.allocateTransferUid();
            statuses.add((MoriStatus) pair.session.batchWrite(BatchPlan.mirrored(offsets, BLOCK_BYTES), uid));
        }
        return statuses;
    }

    @Test
    void nativeWaitAllCostsTheWholeTimeoutWhenTheLastCopiesAreRunningAtItsFirstQuestion() {
        try (SimPair pair = new SimPair("measured-native", LAYERS * LAYER_BYTES)) {
            List<MoriStatus> statuses = postRequest(pair);
            long start = pair.sim.nowNanos();
            StatusCode code = pair.p.waitAll(statuses, TIMEOUT.toMillis());
            long waited = pair.sim.nowNanos() - start;

            // The first status's wait ends at the deadline truncated to whole milliseconds (MoRI's 29.999 s),
            // however early the copies finish; the other 117 are then polled once each.
            assertThat(waited).isGreaterThanOrEqualTo(TIMEOUT.minusMillis(1).toNanos());
            // Whether those polls beat the deadline's last sub-millisecond decides SUCCESS or IN_PROGRESS.
            assertThat(code).isIn(StatusCode.SUCCESS, StatusCode.IN_PROGRESS);
            // Every copy succeeds: the wait's length was never the copies'.
            CompletionWait.failFast(REACTIVE_TIMEOUT).await(statuses).block();
            assertThat(statuses).allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
        }
    }

    @Test
    void reactiveWaitEndsAfterTheLastCopyAndFarFromItsTimeout() {
        try (SimPair pair = new SimPair("measured-reactive", LAYERS * LAYER_BYTES)) {
            List<MoriStatus> statuses = postRequest(pair);
            long start = pair.sim.nowNanos();
            CompletionWait.failFast(REACTIVE_TIMEOUT).await(statuses).block();
            long waited = pair.sim.nowNanos() - start;
            long copiesDone = pair.sim.finishNanos(statuses.getLast()) - start;

            // Not before the last copy finished, and far from the timeout; how close to the copies it ends is a
            // timing figure that kvflux repro --backend native-sim prints (a loaded machine stretches it here).
            assertThat(waited).isGreaterThanOrEqualTo(copiesDone);
            assertThat(waited).isLessThan(REACTIVE_TIMEOUT.toNanos() / 2);
            assertThat(statuses).allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
        }
    }
}
