package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

class CopyPlanTest {
    private static final long BLOCK = 32 * 1024;

    @Test
    void theMoriIoMeasurementsEveryOtherBlockLayoutStaysOneCopyPerBlock() {
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

    @Test
    void contiguousBlocksGivenOutOfOrderMergeOnceSortedByRemoteOffset() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {2 * BLOCK, 0, BLOCK},
                new long[] {12 * BLOCK, 10 * BLOCK, 11 * BLOCK}, new long[] {BLOCK, BLOCK, BLOCK}));
        assertThat(copies.localOffsets()).containsExactly(0);
        assertThat(copies.remoteOffsets()).containsExactly(10 * BLOCK);
        assertThat(copies.sizes()).containsExactly(3 * BLOCK);
    }

    @Test
    void writeMetadataIsLocalOffsetsThenRemoteOffsetsThenSizes() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {0, 4 * BLOCK, 5 * BLOCK},
                new long[] {8 * BLOCK, 2 * BLOCK, 3 * BLOCK}, new long[] {BLOCK, BLOCK, 16}));
        assertThat(copies.metadata(true)).containsExactly(
                4 * BLOCK, 0,
                2 * BLOCK, 8 * BLOCK,
                BLOCK + 16, BLOCK);
    }

    @Test
    void readMetadataCopiesFromRemoteOffsetsToLocalOffsets() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {0, 6 * BLOCK},
                new long[] {8 * BLOCK, 2 * BLOCK}, new long[] {BLOCK, 3 * BLOCK}));
        assertThat(copies.metadata(false)).containsExactly(
                2 * BLOCK, 8 * BLOCK,
                6 * BLOCK, 0,
                3 * BLOCK, BLOCK);
    }

    @Test
    void theMoriIoMeasurementsLayerBecomesOneHundredTwentyEightSegmentsOfMetadata() {
        long[] offsets = LongStream.range(0, 128).map(b -> 2 * b * BLOCK).toArray();
        long[] meta = CopyPlan.of(BatchPlan.mirrored(offsets, BLOCK)).metadata(true);
        assertThat(meta).hasSize(3 * 128);
        assertThat(meta[127]).isEqualTo(254 * BLOCK);
        assertThat(meta[128 + 127]).isEqualTo(254 * BLOCK);
        assertThat(meta[256]).isEqualTo(BLOCK);
    }

    @Test
    void largestIsTheBiggestMergedCopy() {
        CopyPlan copies = CopyPlan.of(BatchPlan.of(new long[] {0, BLOCK, 5 * BLOCK},
                new long[] {10 * BLOCK, 11 * BLOCK, 20 * BLOCK}, new long[] {BLOCK, BLOCK, BLOCK}));
        assertThat(copies.largest()).isEqualTo(2 * BLOCK);
    }
}
