package dev.kvflux.transfer;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import java.util.function.Supplier;

/**
 * A session found when it is first used: a transfer's session into decode's memory is known only once decode's
 * block list (which names decode's incarnation) has come, after the write was set up.
 */
final class LazySession implements TransferSession {
    private final Supplier<TransferSession> find;
    private volatile TransferSession session;

    LazySession(Supplier<TransferSession> find) {
        this.find = find;
    }

    private TransferSession session() {
        TransferSession s = session;
        if (s == null) {
            synchronized (this) {
                s = session;
                if (s == null) {
                    s = find.get();
                    if (s == null) {
                        throw new IllegalStateException("no engine session for this transfer's decode");
                    }
                    session = s;
                }
            }
        }
        return s;
    }

    @Override
    public long allocateTransferUid() {
        return session().allocateTransferUid();
    }

    @Override
    public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
        return session().batchWrite(plan, transferUid);
    }

    @Override
    public TransferStatus batchRead(BatchPlan plan, long transferUid) {
        return session().batchRead(plan, transferUid);
    }

    @Override
    public MemoryRegion local() {
        return session().local();
    }

    @Override
    public MemoryRegion remote() {
        return session().remote();
    }
}
