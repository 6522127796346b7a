package dev.kvflux.tools.repro;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.config.KvfluxConfig;

/** {@code sim-xgmi}: the pure Java simulation of MoRI over xGMI, timed in real time. */
public final class SimXgmiBackend implements ReproBackend {
    private final KvfluxConfig.Sim sim;

    public SimXgmiBackend(KvfluxConfig config) {
        this.sim = config.engine().sim();
    }

    @Override
    public String name() {
        return SimulatedXgmiEngine.BACKEND;
    }

    @Override
    public ReproTarget open(ReproGeometry g, ReproSettings settings) {
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().timing(sim.timing()).copyPath(sim.copyPath()).build();
        TransferSession session = engine.createSession(engine.registerMemory(g.regionBytes(), 0),
                engine.registerMemory(g.regionBytes(), 1));
        return new ReproTarget() {
            @Override
            public TransferEngine engine() {
                return engine;
            }

            @Override
            public TransferSession session() {
                return session;
            }

            @Override
            public void close() {
                engine.close();
            }
        };
    }
}
