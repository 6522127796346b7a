package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.mori.internal.MoriNative;
import java.util.Objects;

/**
 * A MoRI {@code IOEngineSession}: one local × remote memory pair, the fast path for posting batches.
 * Each batch returns one {@link MoriStatus} (a {@link PushedMoriStatus} when its engine pushes), which the caller
 * closes when done with it.
 */
public final class MoriSession extends EngineHandle implements TransferSession {
    private final MoriMemory local;
    private final MoriMemory remote;

    MoriSession(MoriNative lib, MoriEngine engine, long handle, MoriMemory local, MoriMemory remote) {
        super(lib, engine, handle);
        this.local = local;
        this.remote = remote;
    }

    @Override
    public long allocateTransferUid() {
        return lib.sessionAllocateUid(handle);
    }

    /** {@inheritDoc} The plan is checked against both regions before anything reaches the library. */
    @Override
    public MoriStatus batchWrite(BatchPlan plan, long transferUid) {
        return post(false, plan, transferUid);
    }

    @Override
    public MoriStatus batchRead(BatchPlan plan, long transferUid) {
        return post(true, plan, transferUid);
    }

    /**
     * Posts a batch write with the three arrays passed to the library as they are; the library checks
     * their lengths and ranges.
     *
     * @throws MoriIoException ({@code KVFLUX_MORI_E_INVALID_ARG}) for arrays that disagree or run past a region
     */
    public MoriStatus batchWrite(long[] localOffsets, long[] remoteOffsets, long[] sizes, long transferUid) {
        PushMode mode = engine.pushMode();
        return status(lib.batch(false, handle, localOffsets, remoteOffsets, sizes, transferUid), mode, sum(sizes));
    }

    /** The read counterpart of {@link #batchWrite(long[], long[], long[], long)}. */
    public MoriStatus batchRead(long[] localOffsets, long[] remoteOffsets, long[] sizes, long transferUid) {
        PushMode mode = engine.pushMode();
        return status(lib.batch(true, handle, localOffsets, remoteOffsets, sizes, transferUid), mode, sum(sizes));
    }

    private MoriStatus post(boolean read, BatchPlan plan, long transferUid) {
        Objects.requireNonNull(plan, "plan").checkWithin(local.region().size(), remote.region().size());
        PushMode mode = engine.pushMode(); // read before posting: the library takes the mode at the post
        return status(lib.batch(read, handle, plan.localOffsets(), plan.remoteOffsets(), plan.sizes(), transferUid),
                mode, plan.totalBytes());
    }

    /** A pushed status for a batch posted with {@link PushMode#ON}, else a polled one. */
    private MoriStatus status(long status, PushMode postedWith, long bytes) {
        if (postedWith == PushMode.ON && lib.push().isPresent()) {
            return new PushedMoriStatus(lib, engine, status, bytes, lib.push().get());
        }
        return new MoriStatus(lib, engine, status, bytes);
    }

    private static long sum(long[] sizes) {
        long total = 0;
        for (long size : sizes) {
            total += size;
        }
        return total;
    }

    @Override
    public MemoryRegion local() {
        return local.region();
    }

    @Override
    public MemoryRegion remote() {
        return remote.region();
    }

    /** Destroys the session. */
    @Override
    void release() {
        lib.sessionDestroy(handle);
    }
}
