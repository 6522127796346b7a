package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;

/** A prefill engine and a decode engine on the simulator, connected, each with one host region. */
final class SimPair implements AutoCloseable {
    final NativeTransferEngine p;
    final NativeTransferEngine d;
    final MemoryRegion pRegion;
    final MemoryRegion dRegion;
    final TransferSession session;
    final MoriSimulator sim;

    SimPair(String name, long bytes) {
        p = NativeTransferEngine.simulated(name + "-p");
        d = NativeTransferEngine.simulated(name + "-d");
        p.connect(d);
        pRegion = p.registerMemory(bytes, -1);
        dRegion = d.registerMemory(bytes, -1);
        session = p.createSession(pRegion, p.importMemory(d.exportMemory(dRegion)));
        sim = p.simulator().orElseThrow();
    }

    @Override
    public void close() {
        p.close();
        d.close();
    }
}
