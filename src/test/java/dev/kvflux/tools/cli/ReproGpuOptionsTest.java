package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.tools.repro.GpuSettings;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code kvflux repro}'s GPU options: the settings they make, and a bad value or an option the backend does
 * not take as one usage line with exit code 2, before any backend opens.
 */
class ReproGpuOptionsTest {
    private final StringWriter err = new StringWriter();

    private static GpuSettings settings(String backend, String... args) {
        CommandLine cmd = new CommandLine(new ReproCommand());
        cmd.parseArgs(args);
        ReproCommand repro = cmd.getCommand();
        return repro.gpuOptions.settings(cmd, backend);
    }

    private int run(String... args) {
        return KvfluxCli.commandLine().setErr(new PrintWriter(err, true)).execute(args);
    }

    @Test
    void theCopyPathIsOneMemcpyPerMergedSegmentWithMorisPoolsByDefault() {
        GpuCopyEngine.Config engine = settings("cuda").engine();
        assertThat(engine.scatterGather()).isFalse();
        assertThat(engine.streams()).isEqualTo(GpuCopyEngine.Config.DEFAULT.streams());
        assertThat(engine.events()).isEqualTo(GpuCopyEngine.Config.DEFAULT.events());
    }

    @Test
    void scatterGatherSendsEveryBatchThroughTheKernelUnlessAThresholdIsGiven() {
        assertThat(settings("cuda", "--copy-path", "scatter-gather").engine().scatterGatherThreshold()).isZero();
        assertThat(settings("cuda", "--copy-path", "default").engine().scatterGather()).isFalse();
    }

    @Test
    void theThresholdAppliesWhicheverOptionComesFirst() {
        assertThat(settings("hip", "--scatter-gather-threshold", "64", "--copy-path", "scatter-gather").engine()
                .scatterGatherThreshold()).isEqualTo(64);
    }

    @Test
    void aThresholdWithoutTheScatterGatherPathIsAUsageError() {
        assertThat(run("repro", "--backend", "cuda", "--scatter-gather-threshold", "4")).isEqualTo(2);
        assertThat(err.toString()).isEqualToIgnoringNewLines("--scatter-gather-threshold needs --copy-path scatter-gather");
    }

    @Test
    void anUnknownCopyPathSaysWhichOnesExist() {
        assertThat(run("repro", "--backend", "cuda", "--copy-path", "dma")).isEqualTo(2);
        assertThat(err.toString()).isEqualToIgnoringNewLines("--copy-path must be default or scatter-gather, got 'dma'");
    }

    @Test
    void streamProgressIsOnByDefaultAndBothRunsOnThenOff() {
        assertThat(settings("cuda").engine().sharedStreamProgress()).isTrue();
        assertThat(settings("cuda", "--stream-progress", "off").engine().sharedStreamProgress()).isFalse();
        CommandLine cmd = new CommandLine(new ReproCommand());
        cmd.parseArgs("--stream-progress", "both");
        ReproCommand repro = cmd.getCommand();
        assertThat(repro.gpuOptions.streamProgressRuns(cmd)).containsExactly(true, false);
        assertThat(run("repro", "--backend", "cuda", "--stream-progress", "shared")).isEqualTo(2);
        assertThat(err.toString()).startsWith("--stream-progress must be on, off or both, got 'shared'");
    }

    @Test
    void theStreamPoolIsAnOptionOfAtLeastOneStream() {
        assertThat(settings("cuda", "--streams", "4").engine().streams()).isEqualTo(4);
        assertThat(run("repro", "--backend", "cuda", "--streams", "0")).isEqualTo(2);
        assertThat(err.toString()).startsWith("--streams must be from 1 to 1024, got 0");
    }

    @Test
    void decodeRunsOnGpuOneWhereThereAreTwoElseOnPrefillsOwnUnlessGiven() {
        GpuSettings defaults = settings("cuda");
        assertThat(defaults.prefillGpu()).isZero();
        assertThat(defaults.decodeGpu(8)).isEqualTo(1);
        assertThat(defaults.decodeGpu(1)).isZero();
        assertThat(settings("cuda", "--gpu", "3").decodeGpu(1)).isEqualTo(3);
        assertThat(settings("mori", "--gpu", "2", "--decode-gpu", "5").decodeGpu(8)).isEqualTo(5);
    }

    @Test
    void theForwardPassProcessesAndPlatformReachTheSettings() {
        GpuSettings mori = settings("mori", "--forward-bytes", "8589934592", "--processes", "2", "--gpu-platform", "hip");
        assertThat(mori.forwardBytes()).isEqualTo(8L << 30);
        assertThat(mori.processes()).isEqualTo(2);
        assertThat(mori.platform()).isEqualTo(Optional.of(GpuPlatform.HIP));
        assertThat(settings("cuda").forwardBytes()).isZero();
    }

    @Test
    void theGpuOptionsApplyToTheGpuBackendsOnly() {
        assertThat(run("repro", "--backend", "native-sim", "--gpu", "1")).isEqualTo(2);
        assertThat(run("repro", "--backend", "mori", "--streams", "4")).isEqualTo(2);
        assertThat(run("repro", "--backend", "sim-xgmi", "--copy-path", "scatter-gather")).isEqualTo(2);
        assertThat(err.toString().lines()).containsExactly("--gpu applies to --backend mori, cuda and hip only",
                "--streams applies to --backend cuda and hip only",
                "--copy-path applies to --backend cuda and hip only; the simulators take engine.sim.copy-path from"
                        + " --config");
    }

    @Test
    void aNegativeGpuOrByteCountIsAUsageError() {
        assertThat(run("repro", "--backend", "cuda", "--decode-gpu", "-1")).isEqualTo(2);
        assertThat(run("repro", "--backend", "hip", "--forward-bytes", "-5")).isEqualTo(2);
        assertThat(err.toString().lines()).containsExactly("--decode-gpu must be from 0 to 1023, got -1",
                "--forward-bytes must be 0 or more, got -5");
    }
}
