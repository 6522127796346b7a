package dev.kvflux.pipeline.repro;

import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.pipeline.config.KvfluxConfig;

/**
 * {@code mori}: the seed's experiment through FFM on the real MoRI IO ({@code libkvflux_mori.so} over
 * {@code libmori_io.so}), xGMI from GPU 0 to GPU 1. Where the shim or MoRI is missing, {@link #open}
 * fails with the loader's reason and how to build and point at the shim.
 */
final class MoriBackend implements ReproBackend {

    MoriBackend(KvfluxConfig config) {
    }

    @Override
    public String name() {
        return "mori";
    }

    @Override
    public ReproTarget open(ReproGeometry g) {
        MoriIo io = MoriIo.mori();
        throw new UnsupportedOperationException("MoRI IO loaded from " + io.library() + ", but the mori backend"
                + " registers device memory, which needs the GPU runtime binding (dev.kvflux.bindings.gpu); this"
                + " build does not have it yet. Use --backend native-sim meanwhile");
    }
}
