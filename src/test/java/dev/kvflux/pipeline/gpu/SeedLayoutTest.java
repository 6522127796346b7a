package dev.kvflux.pipeline.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SeedLayoutTest {
    private static final long MIB = 1024 * 1024;

    @Test
    void blockBOfLayerLSitsAtLayerTimes8MiBPlusTwoBBlocks() {
        SeedLayout seed = SeedLayout.SEED;
        assertThat(seed.layerBytes()).isEqualTo(8 * MIB);
        assertThat(seed.offset(3, 5)).isEqualTo(3 * 8 * MIB + 2 * 5 * 32 * 1024);
        assertThat(seed.bufferBytes()).isEqualTo(118 * 8 * MIB);
        assertThat(seed.bytesPerRequest()).isEqualTo(118L * 128 * 32 * 1024);
    }

    @Test
    void aLayersBatchHasOneBlockPerSlotFittingTheBuffer() {
        SeedLayout seed = SeedLayout.SEED;
        BatchPlan last = seed.layerPlan(117);
        assertThat(last.blocks()).isEqualTo(128);
        assertThat(last.totalBytes()).isEqualTo(4 * MIB);
        last.checkWithin(seed.bufferBytes(), seed.bufferBytes());
        assertThat(last.remoteOffset(127) + last.size(127)).isEqualTo(seed.bufferBytes() - 32 * 1024);
    }

    @Test
    void fillValuesAreNeverZeroAndDifferBetweenNeighbours() {
        Set<Integer> seen = new HashSet<>();
        int sameAsNext = 0;
        for (int b = 0; b < 128; b++) {
            int v = SeedLayout.fill(4, 10, b);
            assertThat(v).isBetween(1, 255);
            seen.add(v);
            if (v == SeedLayout.fill(4, 10, b + 1)) {
                sameAsNext++;
            }
        }
        assertThat(seen.size()).isGreaterThan(64);
        assertThat(sameAsNext).isLessThan(4);
        assertThat(SeedLayout.fill(4, 10, 0)).isNotEqualTo(SeedLayout.fill(5, 10, 0));
    }
}
