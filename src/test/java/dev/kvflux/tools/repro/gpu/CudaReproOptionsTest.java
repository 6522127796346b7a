package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.tools.repro.ReproStrategy;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The reproducer's choice of copy path and stream progress, and its query ratio. */
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

    @Test
    void streamProgressIsSharedByDefaultAndBothRunsSharedThenUnshared() {
        assertThat(CudaRepro.Options.parse(new String[0]).engineConfig().sharedStreamProgress()).isTrue();
        CudaRepro.Options both = CudaRepro.Options.parse(new String[] {"--stream-progress", "both"});
        assertThat(both.streamProgress).containsExactly(true, false);
        assertThat(both.engineConfig(false).sharedStreamProgress()).isFalse();
        assertThat(both.engineConfig(false).streams()).isEqualTo(GpuCopyEngine.Config.DEFAULT.streams());
        assertThat(CudaRepro.Options.parse(new String[] {"--stream-progress", "unshared"}).engineConfig()
                .sharedStreamProgress()).isFalse();
        assertThatThrownBy(() -> CudaRepro.Options.parse(new String[] {"--stream-progress", "off"}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("shared, unshared or both");
    }

    @Test
    void theRatioLineDividesUnsharedBySharedQueriesPerStatusOverAllRequests() {
        List<CudaRepro.Figures> figures = List.of(
                figures(ReproStrategy.REACTIVE, true, 100, 1.0), figures(ReproStrategy.REACTIVE, true, 136, 3.0),
                figures(ReproStrategy.REACTIVE, false, 5900, 2.0),
                figures(ReproStrategy.REACTIVE_PUSH, true, 118, 0.1));
        assertThat(CudaRepro.ratioLines(figures)).containsExactly("reactive: native event queries per status 50.00"
                + " unshared, 1.00 shared (50.0x fewer shared); in the wait alone 49.00 unshared, 0.00 shared"
                + " (all fewer shared); detection lag median 2.000 ms unshared, 2.000 ms shared");
    }

    @Test
    void theStreamPoolSizeIsAnOptionOfAtLeastOne() {
        assertThat(CudaRepro.Options.parse(new String[] {"--streams", "4"}).engineConfig().streams()).isEqualTo(4);
        assertThatThrownBy(() -> CudaRepro.Options.parse(new String[] {"--streams", "0"}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("at least 1");
    }

    private static CudaRepro.Figures figures(ReproStrategy strategy, boolean shared, long queries, double lagMs) {
        long waitQueries = shared ? 0 : queries - 118;
        return new CudaRepro.Figures(strategy, 0, 10, "ok", 118, 118, 9, 0.1, 1, 5, lagMs, 0, 0, shared, queries,
                waitQueries);
    }
}
