package dev.kvflux.tools.cli;

import static dev.kvflux.tools.cli.OptionChecks.require;

import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.tools.repro.GpuSettings;
import dev.kvflux.tools.repro.gpu.MoriReproBackend;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code kvflux repro}'s options for the GPU backends ({@code @Mixin}): which GPUs, the stand-in forward
 * pass, the {@code cuda} and {@code hip} prefill engine's copy path, stream pool and stream progress, and
 * {@code mori}'s process layout and GPU runtime. {@link #settings} refuses, as a usage error, a value out of
 * range or an option the chosen backend does not take.
 */
final class ReproGpuOptions {
    /** The backends whose prefill engine is kvflux's {@link GpuCopyEngine}. */
    private static final Set<String> COPY_ENGINE = Set.of(GpuPlatform.CUDA.prefix(), GpuPlatform.HIP.prefix());
    private static final String GPU_BACKENDS = "--backend mori, cuda and hip only";
    private static final String COPY_ENGINE_BACKENDS = "--backend cuda and hip only";
    static final int MAX_GPU = 1023;
    static final int MAX_STREAMS = 1024;

    @Option(names = "--gpu", paramLabel = "N", description = "mori, cuda and hip: prefill's GPU (default 0).")
    Integer gpu;

    @Option(names = "--decode-gpu", paramLabel = "N",
            description = "mori, cuda and hip: decode's GPU (default: 1 where the machine has two or more GPUs, else"
                    + " prefill's own; every backend can copy within one GPU).")
    Integer decodeGpu;

    @Option(names = "--forward-bytes", paramLabel = "BYTES",
            description = "mori, cuda and hip: bytes of scratch the stand-in forward pass writes on prefill's GPU"
                    + " before each layer's blocks, so that the GPU runs behind the posting as in a real prefill"
                    + " (default 0: the GPU only fills the blocks and keeps up with the posting).")
    Long forwardBytes;

    @Option(names = "--copy-path", paramLabel = "PATH",
            description = "cuda and hip: default, one cudaMemcpyAsync per merged segment; scatter-gather, one kernel"
                    + " per batch (CUDA only, through libcuda.so.1). The simulators take engine.sim.copy-path.")
    String copyPath;

    @Option(names = "--scatter-gather-threshold", paramLabel = "BLOCKS",
            description = "cuda and hip with --copy-path scatter-gather: only batches of more than this many blocks"
                    + " go through the kernel, as with MoRI's threshold (default 0: every batch).")
    Integer threshold;

    @Option(names = "--streams", paramLabel = "N",
            description = "cuda and hip: the prefill engine's stream pool, which batches take in turn (default 64,"
                    + " as MoRI's).")
    Integer streams;

    @Option(names = "--stream-progress", paramLabel = "on|off|both",
            description = "cuda and hip: on (default), statuses on one stream share what their event queries saw;"
                    + " off, each status queries its own event, as MoRI does; both, every strategy on, then off with a"
                    + " fresh prefill and decode, and how many times fewer native event queries per status sharing"
                    + " made.")
    String streamProgress;

    @Option(names = "--processes", paramLabel = "N",
            description = "mori backend only: 1 (default), both MoRI engines in this process; 2, decode's engine"
                    + " and buffer in a child process on decode's GPU, reached through real IPC handles.")
    Integer processes;

    @Option(names = "--gpu-platform", paramLabel = "PLATFORM",
            description = "mori backend only: the GPU runtime, cuda (NVIDIA) or hip (AMD); default: CUDA if"
                    + " installed, else HIP. The MoRI shim must be built for the same platform.")
    String gpuPlatform;

    /**
     * The GPU settings for {@code backend}: the defaults where an option is not given.
     *
     * @throws CommandLine.ParameterException if an option is out of range or does not apply to {@code backend}
     */
    GpuSettings settings(CommandLine cmd, String backend) {
        boolean gpuBackend = ReproBackends.GPU.contains(backend);
        boolean copyEngine = COPY_ENGINE.contains(backend);
        boolean mori = backend.equals(MoriReproBackend.NAME);
        require(cmd, processes == null || mori, "--processes applies to --backend mori only");
        require(cmd, gpuPlatform == null || mori, "--gpu-platform applies to --backend mori only"
                + " (--backend cuda and hip name their platform)");
        require(cmd, processes == null || processes == 1 || processes == 2, "--processes must be 1 or 2, got " + processes);
        require(cmd, gpuPlatform == null || gpuPlatform.equals("cuda") || gpuPlatform.equals("hip"),
                "--gpu-platform must be cuda or hip, got '" + gpuPlatform + "'");
        appliesTo(cmd, "--gpu", gpu, gpuBackend, GPU_BACKENDS);
        appliesTo(cmd, "--decode-gpu", decodeGpu, gpuBackend, GPU_BACKENDS);
        appliesTo(cmd, "--forward-bytes", forwardBytes, gpuBackend, GPU_BACKENDS);
        appliesTo(cmd, "--copy-path", copyPath, copyEngine, COPY_ENGINE_BACKENDS
                + "; the simulators take engine.sim.copy-path from --config");
        appliesTo(cmd, "--scatter-gather-threshold", threshold, copyEngine, COPY_ENGINE_BACKENDS);
        appliesTo(cmd, "--streams", streams, copyEngine, COPY_ENGINE_BACKENDS);
        appliesTo(cmd, "--stream-progress", streamProgress, copyEngine, COPY_ENGINE_BACKENDS);
        if (gpu != null) {
            OptionChecks.inRange(cmd, "--gpu", gpu, 0, MAX_GPU);
        }
        if (decodeGpu != null) {
            OptionChecks.inRange(cmd, "--decode-gpu", decodeGpu, 0, MAX_GPU);
        }
        require(cmd, forwardBytes == null || forwardBytes >= 0, "--forward-bytes must be 0 or more, got " + forwardBytes);
        require(cmd, copyPath == null || copyPath.equals("default") || copyPath.equals("scatter-gather"),
                "--copy-path must be default or scatter-gather, got '" + copyPath + "'");
        boolean scatterGather = "scatter-gather".equals(copyPath);
        require(cmd, threshold == null || scatterGather, "--scatter-gather-threshold needs --copy-path scatter-gather");
        require(cmd, threshold == null || threshold >= 0, "--scatter-gather-threshold is a block count, 0 or more, got "
                + threshold);
        if (streams != null) {
            OptionChecks.inRange(cmd, "--streams", streams, 1, MAX_STREAMS);
        }
        List<Boolean> runs = streamProgressRuns(cmd);
        GpuCopyEngine.Config engine = new GpuCopyEngine.Config(streams != null ? streams
                : GpuCopyEngine.Config.DEFAULT.streams(), GpuCopyEngine.Config.DEFAULT.events(),
                scatterGather ? (threshold != null ? threshold : 0) : GpuCopyEngine.Config.SCATTER_GATHER_OFF,
                runs.getFirst());
        return new GpuSettings(gpu != null ? gpu : 0, decodeGpu != null ? OptionalInt.of(decodeGpu) : OptionalInt.empty(),
                forwardBytes != null ? forwardBytes : 0, engine, processes != null ? processes : 1,
                Optional.ofNullable(gpuPlatform).map(GpuPlatform::named));
    }

    /** The shared stream progress of each run, in order: on; off; or on, then off. */
    List<Boolean> streamProgressRuns(CommandLine cmd) {
        return switch (streamProgress == null ? "on" : streamProgress) {
            case "on" -> List.of(true);
            case "off" -> List.of(false);
            case "both" -> List.of(true, false);
            default -> throw new CommandLine.ParameterException(cmd, "--stream-progress must be on, off or both, got '"
                    + streamProgress + "'");
        };
    }

    private static void appliesTo(CommandLine cmd, String option, Object value, boolean applies, String backends) {
        require(cmd, value == null || applies, option + " applies to " + backends);
    }
}
