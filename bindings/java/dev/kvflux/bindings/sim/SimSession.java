package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;

/** A local × remote pair of the simulated engine; reads and writes share the one link. */
final class SimSession implements TransferSession {
    private final SimulatedXgmiEngine engine;
    private final MemoryRegion local;
    private final MemoryRegion remote;

    SimSession(SimulatedXgmiEngine engine, MemoryRegion local, MemoryRegion remote) {
        this.engine = engine;
        this.local = local;
        this.remote = remote;
    }

    @Override
    public long allocateTransferUid() {
        return engine.allocateUid();
    }

    @Override
    public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
        return engine.post(this, plan);
    }

    @Override
    public TransferStatus batchRead(BatchPlan plan, long transferUid) {
        return engine.post(this, plan);
    }

    @Override
    public MemoryRegion local() {
        return local;
    }

    @Override
    public MemoryRegion remote() {
        return remote;
    }
}
