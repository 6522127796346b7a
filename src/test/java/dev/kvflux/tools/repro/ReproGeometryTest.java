package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import org.junit.jupiter.api.Test;

class ReproGeometryTest {
    private static final long MIB = 1024 * 1024;

    @Test
    void blockBOfLayerLSitsAtLayerTimes8MiBPlusTwoBBlocks() {
        ReproGeometry g = ReproGeometry.VLLM_MORI_IO;
        assertThat(g.layerStride()).isEqualTo(8 * MIB);
        assertThat(g.offset(3, 5)).isEqualTo(3 * 8 * MIB + 2 * 5 * 32 * 1024);
        assertThat(g.regionBytes()).isEqualTo(118 * 8 * MIB);
        assertThat(g.requestBytes()).isEqualTo(118L * 128 * 32 * 1024);
    }

    @Test
    void aLayersBatchHasOneBlockPerSlotFittingTheBuffer() {
        ReproGeometry g = ReproGeometry.VLLM_MORI_IO;
        BatchPlan last = g.plan(117);
        assertThat(last.blocks()).isEqualTo(128);
        assertThat(last.totalBytes()).isEqualTo(4 * MIB);
        last.checkWithin(g.regionBytes(), g.regionBytes());
        assertThat(last.remoteOffset(127) + last.size(127)).isEqualTo(g.regionBytes() - 32 * 1024);
    }
}
