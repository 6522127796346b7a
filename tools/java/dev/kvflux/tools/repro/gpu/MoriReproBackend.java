package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproTarget;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;

/**
 * {@code kvflux repro --backend mori}: the seed's experiment on the real MoRI IO ({@code libkvflux_mori.so}
 * over {@code libmori_io.so}, built by {@code bindings/native/mori/build.sh}), through its xGMI backend from
 * a buffer on GPU 0 into one on GPU 1, on NVIDIA (CUDA) or AMD (HIP) GPUs.
 *
 * <p>Layouts ({@value #PROCESSES_PROPERTY}, {@code kvflux repro --processes}): 1, both MoRI engines and
 * buffers in this process; 2, decode's engine and buffer in a child process on GPU 1, its packed
 * {@code EngineDesc} and {@code MemoryDesc} sent over loopback TCP, so MoRI opens decode's buffer through a
 * real IPC handle. The GPU runtime is the one {@link GpuRuntime#load()} picks: {@value
 * GpuRuntime#RUNTIME_PROPERTY} ({@code kvflux repro --gpu-platform}), else CUDA if installed, else HIP; the
 * shim must have been built for the same platform.
 *
 * <p>Per request, a stream on GPU 0 runs the stand-in forward pass, queued whole when the request starts:
 * per layer, {@value #FORWARD_BYTES_PROPERTY} bytes of scratch writes (default 0), the layer's 128 blocks
 * filled (one byte value per block and request), the layer's event; then the scratch writes once more (the
 * model's tail). The layer's one {@code batch_write} is posted once its event is ready, so MoRI's copies
 * run beside the layers still computing, as in a real prefill. After each wait decode copies its buffer
 * back and counts mismatched bytes, and the request's statuses are released; each wait reports
 * {@code mismatched_bytes} and {@code leaked_handles} (MoRI handles open beyond those of the engines,
 * buffers and session). Closing checks that no MoRI handle is left open in either process.
 */
final class MoriReproBackend implements ReproBackend {
    /** 1 (default) or 2: how many processes the run uses. */
    static final String PROCESSES_PROPERTY = "kvflux.repro.processes";
    /** Bytes of scratch the stand-in forward pass writes per layer (default 0), as for the cuda backend. */
    static final String FORWARD_BYTES_PROPERTY = "kvflux.gpu.forward-bytes";
    static final int PREFILL_GPU = 0;
    static final int DECODE_GPU = 1;

    private final KvfluxConfig config;

    MoriReproBackend(KvfluxConfig config) {
        this.config = config;
    }

    @Override
    public String name() {
        return "mori";
    }

    @Override
    public ReproTarget open(ReproGeometry g) {
        return open(g, config.transfer().timeout());
    }

    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        return open(g, settings.transferTimeout());
    }

    private ReproTarget open(ReproGeometry g, Duration transferTimeout) {
        int processes = Integer.getInteger(PROCESSES_PROPERTY, 1);
        if (processes != 1 && processes != 2) {
            throw new IllegalArgumentException("the mori backend runs in 1 or 2 processes, not " + processes);
        }
        MoriIo io = MoriIo.mori(); // first: the clearest error where the shim or MoRI is missing
        GpuRuntime runtime = GpuRuntime.load();
        int devices = runtime.deviceCount();
        if (devices < 2) {
            throw new IllegalStateException("the mori backend writes from GPU " + PREFILL_GPU + " into GPU "
                    + DECODE_GPU + " over MoRI's xGMI backend and needs two GPUs; the " + runtime.platform().prefix()
                    + " runtime sees " + devices);
        }
        System.err.printf("mori: %s, %s runtime (%s), %d process%s%n", io.library(), runtime.platform().prefix(),
                runtime.library(), processes, processes == 1 ? "" : "es");
        MoriDecodeSide decode;
        try {
            decode = processes == 1 ? MoriDecodeSide.inProcess(runtime, g)
                    : MoriDecodeSide.child(runtime, g, System.err);
        } catch (IOException e) {
            throw new UncheckedIOException("could not start the decode process: " + e.getMessage(), e);
        }
        try {
            return new MoriPrefillTarget(io, runtime, g, decode, transferTimeout,
                    Long.getLong(FORWARD_BYTES_PROPERTY, 0L));
        } catch (RuntimeException e) {
            decode.close();
            throw e;
        }
    }
}
