package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The scatter/gather threshold, with the semantics of MoRI's MORI_IO_XGMI_SCATTER_GATHER_THRESHOLD. */
class GpuCopyEngineConfigTest {

    @Test
    void anUnsetThresholdLeavesScatterGatherOff() {
        GpuCopyEngine.Config config = GpuCopyEngine.Config.DEFAULT;
        assertThat(config.scatterGather()).isFalse();
        assertThat(config.scatterGather(100_000)).isFalse();
    }

    @Test
    void thresholdZeroSendsEveryBatchThroughTheKernel() {
        GpuCopyEngine.Config config = GpuCopyEngine.Config.DEFAULT.withScatterGatherThreshold(0);
        assertThat(config.scatterGather(1)).isTrue();
        assertThat(config.scatterGather(128)).isTrue();
    }

    @Test
    void thresholdNSendsOnlyBatchesOfMoreThanNBlocks() {
        GpuCopyEngine.Config config = GpuCopyEngine.Config.DEFAULT.withScatterGatherThreshold(64);
        assertThat(config.scatterGather(64)).isFalse();
        assertThat(config.scatterGather(65)).isTrue();
    }

    @Test
    void sharedStreamProgressIsOnByDefaultAndEachWitherKeepsTheOtherSettings() {
        assertThat(GpuCopyEngine.Config.DEFAULT.sharedStreamProgress()).isTrue();
        assertThat(new GpuCopyEngine.Config(8, 4, 3).sharedStreamProgress()).isTrue();
        GpuCopyEngine.Config off = new GpuCopyEngine.Config(8, 4).withSharedStreamProgress(false)
                .withScatterGatherThreshold(3);
        assertThat(off).isEqualTo(new GpuCopyEngine.Config(8, 4, 3, false));
        assertThat(off.withSharedStreamProgress(true)).isEqualTo(new GpuCopyEngine.Config(8, 4, 3));
    }

    @Test
    void theThresholdKeepsThePoolSizes() {
        GpuCopyEngine.Config config = new GpuCopyEngine.Config(8, 4).withScatterGatherThreshold(3);
        assertThat(config).isEqualTo(new GpuCopyEngine.Config(8, 4, 3));
    }

    @Test
    void aNegativeThresholdOtherThanOffIsRejected() {
        assertThatThrownBy(() -> GpuCopyEngine.Config.DEFAULT.withScatterGatherThreshold(-2))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("scatter/gather threshold is a block count");
    }
}
