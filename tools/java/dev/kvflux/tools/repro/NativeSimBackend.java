package dev.kvflux.tools.repro;

import dev.kvflux.bindings.mori.MoriSimulator;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@code native-sim}: vLLM's MoRI-IO measurement through FFM on the native simulator of MoRI's xGMI backend
 * ({@code libkvflux_mori_sim.so}, shipped in the jar), timed in real time. The simulator's copy timing is
 * taken from {@code engine.sim} (per-block overhead and bandwidth), as the {@code sim-xgmi} backend's is.
 */
public final class NativeSimBackend implements ReproBackend {
    private static final AtomicInteger OPENED = new AtomicInteger();
    private final KvfluxConfig.Sim timing;

    public NativeSimBackend(KvfluxConfig config) {
        this.timing = config.engine().sim();
    }

    @Override
    public String name() {
        return "native-sim";
    }

    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        int n = OPENED.incrementAndGet();
        NativeTransferEngine p = NativeTransferEngine.simulated("kvflux-repro-p" + n);
        NativeTransferEngine d = null;
        try {
            d = NativeTransferEngine.simulated("kvflux-repro-d" + n);
            MoriSimulator sim = p.simulator().orElseThrow();
            sim.setTiming(p.engine(), timing.perBlockOverhead(), (long) (timing.bandwidthGbps() * 1e9));
            return NativeReproTarget.overHostBuffers(p, d, g);
        } catch (RuntimeException e) {
            p.close();
            if (d != null) {
                d.close();
            }
            throw e;
        }
    }
}
