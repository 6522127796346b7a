package dev.kvflux.pipeline.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.gpu.GpuCopyEngine;
import org.junit.jupiter.api.Test;

/** The reproducer's choice of copy path. */
class CudaReproOptionsTest {

    @Test
    void theCopyPathIsOneMemcpyPerBlockByDefault() {
        CudaRepro.Options o = CudaRepro.Options.parse(new String[0]);
        assertThat(o.engineConfig().scatterGather()).isFalse();
        assertThat(o.engineConfig().streams()).isEqualTo(GpuCopyEngine.Config.DEFAULT.streams());
    }

    @Test
    void scatterGatherSendsEveryBatchThroughTheKernelUnlessAThresholdIsGiven() {
        CudaRepro.Options o = CudaRepro.Options.parse(new String[] {"--copy-path", "scatter-gather"});
        assertThat(o.engineConfig().scatterGatherThreshold()).isZero();
    }

    @Test
    void theThresholdAppliesWhicheverOptionComesFirst() {
        CudaRepro.Options o = CudaRepro.Options.parse(
                new String[] {"--scatter-gather-threshold", "64", "--copy-path", "scatter-gather"});
        assertThat(o.engineConfig().scatterGatherThreshold()).isEqualTo(64);
    }

    @Test
    void aThresholdWithoutTheScatterGatherPathIsRejected() {
        assertThatThrownBy(() -> CudaRepro.Options.parse(new String[] {"--scatter-gather-threshold", "4"}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("needs --copy-path scatter-gather");
    }

    @Test
    void anUnknownCopyPathSaysWhichOnesExist() {
        assertThatThrownBy(() -> CudaRepro.Options.parse(new String[] {"--copy-path", "dma"}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("memcpy or scatter-gather");
    }
}
