package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproTarget;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code kvflux repro --backend cuda} (or {@code hip}): the seed's experiment between two GPUs in two
 * processes, through {@link dev.kvflux.bindings.gpu.GpuCopyEngine}. The decode process is a child on the
 * decode GPU; the prefill side runs in the {@code kvflux} process.
 *
 * <p>Each layer's copies wait for the layer's event on the GPU (a stream wait), so the host never waits
 * for a layer: {@link ReproTarget#layerEvent} queues the layer's stand-in forward pass and returns an event
 * that is ready at once. Every batch is posted with push completion, so {@code reactive-push} can be timed
 * next to the polled strategies; a pushed status still completes only through its event's query.
 *
 * <p>Devices and the stand-in forward pass come from system properties: {@code kvflux.gpu.prefill-device}
 * (0), {@code kvflux.gpu.decode-device} (1), {@code kvflux.gpu.forward-bytes} (0, bytes of scratch the
 * compute stream writes per layer), {@code kvflux.gpu.scatter-gather-threshold} (unset: one copy per
 * block; 0: one scatter/gather kernel per batch; N: for batches of more than N blocks); the library from
 * {@value GpuRuntime#LIBRARY_PROPERTY}.
 */
public final class GpuBackend implements ReproBackend {
    private final GpuPlatform platform;
    private final KvfluxConfig config;

    public GpuBackend(GpuPlatform platform, KvfluxConfig config) {
        this.platform = platform;
        this.config = config;
    }

    @Override
    public String name() {
        return platform.prefix();
    }

    /** Opens with the configuration's transfer timeout ({@code transfer.timeout}). */
    @Override
    public ReproTarget open(ReproGeometry g) {
        return open(g, config.transfer().timeout());
    }

    /** Opens with the run's transfer timeout, which bounds how long a request's copies may take. */
    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        return open(g, settings.transferTimeout());
    }

    private ReproTarget open(ReproGeometry g, Duration transferTimeout) {
        String library = System.getProperty(GpuRuntime.LIBRARY_PROPERTY);
        GpuRuntime runtime = library != null ? GpuRuntime.load(platform, Path.of(library)) : GpuRuntime.load(platform);
        int prefill = Integer.getInteger("kvflux.gpu.prefill-device", 0);
        int decode = Integer.getInteger("kvflux.gpu.decode-device", 1);
        int devices = runtime.deviceCount();
        if (prefill == decode || Math.max(prefill, decode) >= devices) {
            throw new IllegalStateException("the " + name() + " backend needs two GPUs (prefill "
                    + prefill + ", decode " + decode + ") but this machine has " + devices
                    + "; set -Dkvflux.gpu.prefill-device / -Dkvflux.gpu.decode-device");
        }
        try {
            return new Target(PrefillPair.open(runtime, g, prefill, decode,
                    Long.getLong("kvflux.gpu.forward-bytes", 0L), GpuCopyEngine.Config.DEFAULT
                            .withScatterGatherThreshold(Integer.getInteger("kvflux.gpu.scatter-gather-threshold",
                                    GpuCopyEngine.Config.SCATTER_GATHER_OFF)), transferTimeout, System.err), g);
        } catch (IOException e) {
            throw new UncheckedIOException("could not start the decode process: " + e.getMessage(), e);
        }
    }

    /** One run's pair, driven through the reproducer's SPI. */
    private static final class Target implements ReproTarget, TransferSession {
        private static final LayerEvent ORDERED_ON_GPU = () -> EventState.READY;
        private final PrefillPair pair;
        private final ReproGeometry layout;
        private long request = -1;
        private int layer;
        private long lastPost;

        Target(PrefillPair pair, ReproGeometry layout) {
            this.pair = pair;
            this.layout = layout;
        }

        @Override
        public TransferEngine engine() {
            return pair.engine();
        }

        @Override
        public TransferSession session() {
            return this;
        }

        @Override
        public LayerEvent layerEvent(int ignoredRequest, int layer) {
            if (layer == 0) {
                request++;
                pair.startRequest();
            }
            pair.fill(request, layer);
            this.layer = layer;
            return ORDERED_ON_GPU;
        }

        @Override
        public Map<String, Object> afterWait(int ignoredRequest) {
            long waitEnd = System.nanoTime();
            PrefillPair.Measurement m = pair.finish(request, lastPost, waitEnd);
            Map<String, Object> figures = new LinkedHashMap<>();
            figures.put("raw_copy_ms", m.rawCopyMs());
            figures.put("copy_end_after_wait_start_ms", m.copyEndAfterWaitStartMs());
            figures.put("detection_lag_ms", m.lagMs());
            figures.put("mismatched_bytes", m.mismatchedBytes());
            return figures;
        }

        @Override
        public long allocateTransferUid() {
            return pair.session().allocateTransferUid();
        }

        @Override
        public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
            if (plan.blocks() != layout.blocks() || plan.remoteOffset(0) != layout.offset(layer, 0)) {
                throw new IllegalArgumentException("the GPU target posts each layer right after its event;"
                        + " got a batch that is not layer " + layer + "'s");
            }
            TransferStatus status = pair.write(layer, transferUid, true);
            lastPost = System.nanoTime();
            return status;
        }

        @Override
        public TransferStatus batchRead(BatchPlan plan, long transferUid) {
            return pair.session().batchRead(plan, transferUid);
        }

        @Override
        public MemoryRegion local() {
            return pair.session().local();
        }

        @Override
        public MemoryRegion remote() {
            return pair.session().remote();
        }

        @Override
        public void close() {
            pair.close();
        }
    }
}
