package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

class CopyPlanTest {
    private static final long BLOCK = 32 * 1024;

    @Test
    void theSeedsEveryOtherBlockLayoutStaysOneCopyPerBlock() {
        long[] offsets = LongStream.range(0, 128).map(b -> 3 * 8L * 1024 * 1024 + 2 * b * BLOCK).toArray();
        CopyPlan copies = CopyPlan.of(BatchPlan.mirrored(offsets, BLOCK));
        assertThat(copies.copies()).isEqualTo(128);
        assertThat(copies.localOffsets()).containsExactly(offsets);
        assertThat(copies.sizes()).containsOnly(BLOCK);
    }

    @Test
    void neighboursContiguousOnBothSidesMergeIntoOneCopy() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {0, BLOCK, 5 * BLOCK},
                new long[] {10 * BLOCK, 11 * BLOCK, 12 * BLOCK}, new long[] {BLOCK, BLOCK, BLOCK}));
        assertThat(copies.localOffsets()).containsExactly(0, 5 * BLOCK);
        assertThat(copies.remoteOffsets()).containsExactly(10 * BLOCK, 12 * BLOCK);
        assertThat(copies.sizes()).containsExactly(2 * BLOCK, BLOCK);
    }

    @Test
    void blocksAreCopiedInRemoteOffsetOrder() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {0, 4 * BLOCK},
                new long[] {8 * BLOCK, 2 * BLOCK}, new long[] {BLOCK, BLOCK}));
        assertThat(copies.remoteOffsets()).containsExactly(2 * BLOCK, 8 * BLOCK);
        assertThat(copies.localOffsets()).containsExactly(4 * BLOCK, 0);
    }
}
