package dev.kvflux.pipeline.repro;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MemoryLocation;
import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.pipeline.config.KvfluxConfig;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * {@code mori}: the seed's experiment through FFM on the real MoRI IO ({@code libkvflux_mori.so} over
 * {@code libmori_io.so}), over xGMI from a buffer on GPU 0 into one on GPU 1, both allocated with the HIP
 * runtime. Where the shim, MoRI, the HIP runtime or a second GPU is missing, {@link #open} fails saying
 * which and how to get it.
 */
final class MoriBackend implements ReproBackend {
    private static final int PREFILL_GPU = 0;
    private static final int DECODE_GPU = 1;

    MoriBackend(KvfluxConfig config) {
    }

    @Override
    public String name() {
        return "mori";
    }

    @Override
    public ReproTarget open(ReproGeometry g) {
        MoriIo.mori(); // first: the clearest error where MoRI is not installed
        GpuRuntime gpu = GpuRuntime.load(GpuPlatform.HIP);
        int devices = gpu.deviceCount();
        if (devices < 2) {
            throw new IllegalStateException("the mori backend writes from GPU " + PREFILL_GPU + " into GPU "
                    + DECODE_GPU + " over xGMI and needs two GPUs; the HIP runtime sees " + devices);
        }
        DeviceBuffer src = gpu.allocate(PREFILL_GPU, g.regionBytes());
        DeviceBuffer dst = null;
        NativeTransferEngine p = null;
        NativeTransferEngine d = null;
        try {
            dst = gpu.allocate(DECODE_GPU, g.regionBytes());
            p = NativeTransferEngine.mori("kvflux-repro-p", "127.0.0.1", 0);
            d = NativeTransferEngine.mori("kvflux-repro-d", "127.0.0.1", 0);
            MemoryRegion local = p.registerMemory(segment(src), PREFILL_GPU, MemoryLocation.GPU);
            MemoryRegion remote = d.registerMemory(segment(dst), DECODE_GPU, MemoryLocation.GPU);
            return new Owning(new NativeReproTarget(p, d, g, local, remote, false), src, dst);
        } catch (RuntimeException e) {
            if (p != null) {
                p.close();
            }
            if (d != null) {
                d.close();
            }
            if (dst != null) {
                dst.close();
            }
            src.close();
            throw e;
        }
    }

    private static MemorySegment segment(DeviceBuffer buffer) {
        return MemorySegment.ofAddress(buffer.address()).reinterpret(buffer.size());
    }

    /** The target, then the device buffers it registered, closed in that order. */
    private record Owning(NativeReproTarget target, DeviceBuffer src, DeviceBuffer dst) implements ReproTarget {
        @Override
        public TransferEngine engine() {
            return target.engine();
        }

        @Override
        public TransferSession session() {
            return target.session();
        }

        @Override
        public LayerEvent layerEvent(int request, int layer) {
            return target.layerEvent(request, layer);
        }

        @Override
        public Map<String, Object> afterWait(int request) {
            return target.afterWait(request);
        }

        @Override
        public void close() {
            try {
                target.close();
            } finally {
                try {
                    src.close();
                } finally {
                    dst.close();
                }
            }
        }
    }
}
