package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.GpuSettings;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproTarget;
import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * {@code kvflux repro --backend mori}: vLLM's MoRI-IO measurement on the real MoRI IO
 * ({@code libkvflux_mori.so} over {@code libmori_io.so}, built by {@code bindings/native/mori/build.sh}),
 * through its xGMI backend from a buffer on prefill's GPU ({@code --gpu}, default 0) into one on decode's
 * ({@code --decode-gpu}, default 1 where there are two GPUs, else prefill's), on NVIDIA (CUDA) or AMD (HIP) GPUs.
 * One GPU is enough: with {@code --processes 2} MoRI opens decode's buffer on the same GPU through IPC, as the
 * serving roles over MoRI do.
 *
 * <p>Layouts ({@code --processes}): 1, both MoRI engines and buffers in this process; 2, decode's engine
 * and buffer in a child process ({@link DecodeChild}), its packed {@code EngineDesc} and {@code MemoryDesc}
 * sent over loopback TCP, so MoRI opens decode's buffer through a real IPC handle. The GPU runtime is
 * {@code --gpu-platform}'s, else the one {@link GpuRuntime#load()} finds (CUDA if installed, else HIP); the
 * shim must have been built for the same platform.
 *
 * <p>Per request, a stream on prefill's GPU runs the stand-in forward pass, queued whole when the request
 * starts: per layer, {@code --forward-bytes} of scratch writes (default 0), the layer's blocks filled (one
 * byte value per block and request), the layer's event; then the scratch writes once more (the model's
 * tail). The layer's one {@code batch_write} is posted once its event is ready, so MoRI's copies run beside
 * the layers still computing, as in a real prefill. After each wait decode copies its buffer back and counts
 * mismatched bytes, and the request's statuses are released; each wait reports {@code mismatched_bytes} and
 * {@code leaked_handles} (MoRI handles open beyond those of the engines, buffers and session). Closing
 * checks that no MoRI handle is left open in either process.
 */
public final class MoriReproBackend implements ReproBackend {
    /** The name {@code --backend} takes. */
    public static final String NAME = "mori";

    public MoriReproBackend(KvfluxConfig config) {
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        GpuSettings gpu = settings.gpu();
        MoriIo io = MoriIo.mori(); // first: the clearest error where the shim or MoRI is missing
        GpuRuntime runtime = GpuRuntimes.load(gpu.platform());
        int devices = runtime.deviceCount();
        int prefill = gpu.prefillGpu();
        int decode = gpu.decodeGpu(devices);
        GpuRuntimes.checkDevices(NAME, runtime, prefill, decode);
        int processes = gpu.processes();
        System.err.printf("mori: %s, %s runtime (%s), %d process%s, prefill GPU %d, decode GPU %d%n", io.library(),
                runtime.platform().prefix(), runtime.library(), processes, processes == 1 ? "" : "es", prefill, decode);
        MoriDecodeSide decodeSide;
        try {
            decodeSide = processes == 1 ? MoriDecodeSide.inProcess(runtime, g, decode)
                    : MoriDecodeSide.child(runtime, g, decode, System.err);
        } catch (IOException e) {
            throw new UncheckedIOException("could not start the decode process: " + e.getMessage(), e);
        }
        try {
            return new MoriPrefillTarget(io, runtime, g, prefill, decodeSide, settings.transferTimeout(),
                    gpu.forwardBytes());
        } catch (RuntimeException e) {
            decodeSide.close();
            throw e;
        }
    }
}
