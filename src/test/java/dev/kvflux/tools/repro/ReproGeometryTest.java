package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import org.junit.jupiter.api.Test;

class ReproGeometryTest {
    private static final long MIB = 1024 * 1024;

    @Test
    void blockBOfLayerLSitsAtLayerTimes8MiBPlusTwoBBlocks() {
        ReproGeometry seed = ReproGeometry.SEED;
        assertThat(seed.layerStride()).isEqualTo(8 * MIB);
        assertThat(seed.offset(3, 5)).isEqualTo(3 * 8 * MIB + 2 * 5 * 32 * 1024);
        assertThat(seed.regionBytes()).isEqualTo(118 * 8 * MIB);
        assertThat(seed.requestBytes()).isEqualTo(118L * 128 * 32 * 1024);
    }

    @Test
    void aLayersBatchHasOneBlockPerSlotFittingTheBuffer() {
        ReproGeometry seed = ReproGeometry.SEED;
        BatchPlan last = seed.plan(117);
        assertThat(last.blocks()).isEqualTo(128);
        assertThat(last.totalBytes()).isEqualTo(4 * MIB);
        last.checkWithin(seed.regionBytes(), seed.regionBytes());
        assertThat(last.remoteOffset(127) + last.size(127)).isEqualTo(seed.regionBytes() - 32 * 1024);
    }
}
