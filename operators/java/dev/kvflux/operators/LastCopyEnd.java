package dev.kvflux.operators;

import dev.kvflux.bindings.TransferStatus;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Which of a wait's statuses had its copies end last, among those that succeeded so far: read as each settles, while
 * it is at hand, so that the detection lag at the wait's end reads one status, not every one. Thread-safe.
 */
final class LastCopyEnd {
    private static final VarHandle LATEST;
    /** {@link #latest} before any status succeeded. */
    private static final int NONE = -1;
    /** {@link #latest} once a status that succeeded could not tell when its copies ended (sticky). */
    private static final int UNKNOWN = -2;

    static {
        try {
            LATEST = MethodHandles.lookup().findVarHandle(LastCopyEnd.class, "latest", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final TransferStatus[] statuses;
    /** The index of the status whose copies ended last, or {@link #NONE} or {@link #UNKNOWN}. */
    private volatile int latest = NONE;

    LastCopyEnd(TransferStatus[] statuses) {
        this.statuses = statuses;
    }

    /** Status {@code index} succeeded: kept if its copies ended last so far. */
    void succeeded(int index) {
        if (latest == UNKNOWN) {
            return;
        }
        long at = endOf(index);
        if (at == TransferStatus.UNKNOWN_TIME) {
            latest = UNKNOWN;
            return;
        }
        int seen = latest;
        while (seen != UNKNOWN) {
            if (seen >= 0 && at - endOf(seen) <= 0) {
                return;
            }
            if (LATEST.weakCompareAndSet(this, seen, index)) {
                return;
            }
            seen = latest;
        }
    }

    /**
     * Every status succeeded: gives {@code tally} the detection lag. When one could not tell when its copies ended as it
     * settled, reads every status again, since a backend may learn a copy's end a little after the status settles.
     */
    void lag(WaitTally tally) {
        int last = latest;
        if (last == UNKNOWN) {
            tally.lag(statuses);
        } else {
            tally.lagOf(last >= 0 ? statuses[last] : null);
        }
    }

    /** When status {@code index}'s copies ended, or {@link TransferStatus#UNKNOWN_TIME} (also if it throws). */
    private long endOf(int index) {
        try {
            return statuses[index].completedAtNanos();
        } catch (RuntimeException broken) {
            return TransferStatus.UNKNOWN_TIME;
        }
    }
}
