package dev.kvflux.tools.repro;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.mori.MoriStatus;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A MoRI session that hands every status it posts to a recorder, on the posting thread, before returning
 * it: a {@link ReproTarget} keeps a request's statuses this way, to measure them and release them after
 * its wait. Everything else goes to the session as it is.
 */
public final class RecordingSession implements TransferSession {
    private final TransferSession session;
    private final Consumer<MoriStatus> recorder;

    /** Over {@code session}, whose statuses must be {@link MoriStatus}es. */
    public RecordingSession(TransferSession session, Consumer<MoriStatus> recorder) {
        this.session = Objects.requireNonNull(session, "session");
        this.recorder = Objects.requireNonNull(recorder, "recorder");
    }

    @Override
    public long allocateTransferUid() {
        return session.allocateTransferUid();
    }

    @Override
    public MoriStatus batchWrite(BatchPlan plan, long transferUid) {
        return record(session.batchWrite(plan, transferUid));
    }

    @Override
    public MoriStatus batchRead(BatchPlan plan, long transferUid) {
        return record(session.batchRead(plan, transferUid));
    }

    private MoriStatus record(Object status) {
        MoriStatus mori = (MoriStatus) status;
        recorder.accept(mori);
        return mori;
    }

    @Override
    public MemoryRegion local() {
        return session.local();
    }

    @Override
    public MemoryRegion remote() {
        return session.remote();
    }
}
