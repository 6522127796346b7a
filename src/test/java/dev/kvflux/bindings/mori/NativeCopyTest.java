package dev.kvflux.bindings.mori;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import java.lang.foreign.MemorySegment;
import java.util.List;
import dev.kvflux.testing.NoLiveSimHandles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The simulator really copies bytes between the registered host buffers. */
@ExtendWith(NoLiveSimHandles.class)
class NativeCopyTest {
    private static final long REGION = 1 << 20;
    private static final long BLOCK = 4096;
    private static final long[] FROM = {0, 64 * 1024, 128 * 1024};
    private static final long[] TO = {512 * 1024, 0, 256 * 1024};
    private static final long[] SIZES = {BLOCK, BLOCK, BLOCK};

    private static void fill(MemorySegment buffer, int seed) {
        for (long i = 0; i < buffer.byteSize(); i++) {
            buffer.set(JAVA_BYTE, i, (byte) (i * 31 + seed));
        }
    }

    private static void assertCopied(MemorySegment from, long[] fromOffsets, MemorySegment to, long[] toOffsets) {
        for (int i = 0; i < fromOffsets.length; i++) {
            MemorySegment expected = from.asSlice(fromOffsets[i], BLOCK);
            MemorySegment actual = to.asSlice(toOffsets[i], BLOCK);
            assertThat(actual.mismatch(expected)).as("block %d", i).isEqualTo(-1L);
        }
    }

    @Test
    void batchWriteCopiesEachBlockToItsRemoteOffset() {
        try (SimPair pair = new SimPair("copy-write", REGION)) {
            MemorySegment src = pair.p.buffer(pair.pRegion);
            MemorySegment dst = pair.d.buffer(pair.dRegion);
            fill(src, 7);
            MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.of(FROM, TO, SIZES), 1);

            assertThat(pair.p.waitAll(List.of(status), -1)).isEqualTo(StatusCode.SUCCESS);
            assertCopied(src, FROM, dst, TO);
            assertThat(dst.asSlice(768 * 1024, BLOCK).toArray(JAVA_BYTE)).containsOnly((byte) 0);
        }
    }

    @Test
    void batchReadCopiesEachRemoteBlockToItsLocalOffset() {
        try (SimPair pair = new SimPair("copy-read", REGION)) {
            MemorySegment local = pair.p.buffer(pair.pRegion);
            MemorySegment remote = pair.d.buffer(pair.dRegion);
            fill(remote, 3);
            MoriStatus status = (MoriStatus) pair.session.batchRead(BatchPlan.of(FROM, TO, SIZES), 1);

            assertThat(pair.p.waitAll(List.of(status), -1)).isEqualTo(StatusCode.SUCCESS);
            assertCopied(remote, TO, local, FROM);
        }
    }

    @Test
    void aFailedBatchCopiesNothing() {
        try (SimPair pair = new SimPair("copy-failed", REGION)) {
            fill(pair.p.buffer(pair.pRegion), 5);
            pair.sim.failNth(pair.p.engine(), 1, StatusCode.ERR_GPU_OP, "injected");
            MoriStatus status = (MoriStatus) pair.session.batchWrite(BatchPlan.of(FROM, TO, SIZES), 1);

            assertThat(pair.p.waitAll(List.of(status), -1)).isEqualTo(StatusCode.ERR_GPU_OP);
            assertThat(status.message()).isEqualTo("injected");
            assertThat(pair.d.buffer(pair.dRegion).toArray(JAVA_BYTE)).containsOnly((byte) 0);
        }
    }
}
