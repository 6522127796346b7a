package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.bindings.gpu.PushedLayerEvent;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.GpuSettings;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproTarget;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * {@code kvflux repro --backend cuda} (or {@code hip}): vLLM's MoRI-IO measurement between two processes
 * through {@link GpuCopyEngine} (IPC handle, pooled streams and events). The {@code kvflux} process is prefill
 * on {@code --gpu}; it starts the decode process ({@link DecodeChild}) on {@code --decode-gpu}, GPU 1 by
 * default where there are two, else the same GPU (the IPC handle then maps decode's buffer within it).
 *
 * <p>Each layer's copies wait for the layer's event on the GPU (a stream wait), so the host never waits
 * for a layer: {@link ReproTarget#layerEvent} queues the layer's stand-in forward pass ({@code --forward-bytes}
 * of scratch writes, then each block filled with one value per block and request) and returns an event that
 * is ready at once. Batches are posted with push completion for {@code reactive-push}; a pushed status still
 * completes only through its event's query. Before anything is timed, the run checks both kinds of layer
 * event on prefill's GPU and sends one untimed request with {@code reactive} and one with
 * {@code reactive-push}; a warm-up that fails stops the run. What each wait reports is listed in
 * {@link GpuTarget}.
 *
 * <p>The prefill engine takes its stream pool, copy path and stream progress from {@link GpuSettings#engine()};
 * the runtime library from {@value GpuRuntime#LIBRARY_PROPERTY} if set.
 */
public final class GpuBackend implements ReproBackend {
    private final GpuPlatform platform;

    public GpuBackend(GpuPlatform platform, KvfluxConfig config) {
        this.platform = platform;
    }

    @Override
    public String name() {
        return platform.prefix();
    }

    /** Opens with the run's transfer timeout, which bounds how long a request's copies may take. */
    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        GpuSettings gpu = settings.gpu();
        GpuRuntime runtime = GpuRuntimes.load(platform);
        int devices = runtime.deviceCount();
        int prefill = gpu.prefillGpu();
        int decode = gpu.decodeGpu(devices);
        GpuRuntimes.checkDevices(name(), runtime, prefill, decode);
        PrintStream log = System.err;
        log.printf(Locale.ROOT, "%s: %s, runtime version %d, driver version %d; %d GPU%s; prefill GPU %d, decode GPU"
                + " %d (%s)%n", name(), runtime.library(), runtime.runtimeVersion(), runtime.driverVersion(), devices,
                devices == 1 ? "" : "s", prefill, decode, prefill == decode ? "the same GPU"
                        : "peer access " + prefill + "->" + decode + ": " + runtime.canAccessPeer(prefill, decode));
        log.printf(Locale.ROOT, "%s: stand-in forward pass %d bytes per layer; copy path %s; %d streams; stream"
                + " progress %s%n", name(), gpu.forwardBytes(), copyPath(gpu.engine()), gpu.engine().streams(),
                progress(gpu.engine()));
        checkLayerEvents(runtime, prefill, log);
        try {
            PrefillPair pair = PrefillPair.open(runtime, g, prefill, decode, gpu.forwardBytes(), gpu.engine(),
                    settings.transferTimeout(), log);
            return new GpuTarget(name(), pair, g, settings.transferTimeout(), setup(gpu, prefill, decode), log);
        } catch (IOException e) {
            throw new UncheckedIOException("could not start the decode process: " + e.getMessage(), e);
        }
    }

    /** How the target is set up, as the report prints it. */
    private static Map<String, Object> setup(GpuSettings gpu, int prefill, int decode) {
        GpuCopyEngine.Config engine = gpu.engine();
        Map<String, Object> setup = new LinkedHashMap<>();
        setup.put("prefill_gpu", prefill);
        setup.put("decode_gpu", decode);
        setup.put("forward_bytes", gpu.forwardBytes());
        setup.put("copy_path", engine.scatterGather() ? "scatter-gather" : "default");
        if (engine.scatterGather()) {
            setup.put("scatter_gather_threshold", engine.scatterGatherThreshold());
        }
        setup.put("streams", engine.streams());
        setup.put("stream_progress", progress(engine));
        return setup;
    }

    /** The copy path in words. */
    static String copyPath(GpuCopyEngine.Config engine) {
        return engine.scatterGather()
                ? "scatter-gather (one kernel per batch of more than " + engine.scatterGatherThreshold() + " blocks)"
                : "default (one cudaMemcpyAsync per merged segment)";
    }

    /** {@code on} or {@code off}, as {@code --stream-progress} names them. */
    static String progress(GpuCopyEngine.Config engine) {
        return engine.sharedStreamProgress() ? "on" : "off";
    }

    /** Both kinds of layer event on prefill's GPU: the polled one and the pushed one (a host function). */
    private static void checkLayerEvents(GpuRuntime runtime, int gpu, PrintStream log) {
        try (DeviceBuffer scratch = runtime.allocate(gpu, 64L << 20);
                GpuStream stream = runtime.createStream(gpu);
                GpuEvent polled = runtime.createEvent(gpu, false);
                GpuEvent pushedEvent = runtime.createEvent(gpu, false)) {
            stream.memsetAsync(scratch.address(), 7, scratch.size());
            polled.record(stream);
            long start = System.nanoTime();
            int polls = 1;
            while (polled.query() != EventState.READY) {
                polls++;
            }
            double polledUs = (System.nanoTime() - start) / 1e3;
            stream.memsetAsync(scratch.address(), 9, scratch.size());
            start = System.nanoTime();
            PushedLayerEvent pushed = PushedLayerEvent.recordOn(stream, pushedEvent);
            pushed.ready().block(Duration.ofSeconds(10));
            double pushedUs = (System.nanoTime() - start) / 1e3;
            log.printf(Locale.ROOT, "layer events: polled ready after %d queries (%.1f us); pushed ready after %.1f us,"
                    + " query then says %s%n", polls, polledUs, pushedUs, pushed.query());
        }
    }
}
