package dev.kvflux.operators;

import dev.kvflux.bindings.TransferStatus;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * When the copies of a wait's statuses that succeeded so far ended last: read as each settles, while it is at hand, so
 * that the detection lag at the wait's end reads no status but the first, for its clock (every status of a wait over
 * one engine reads one clock), and a push reads no status but its own. Thread-safe.
 */
final class LastCopyEnd {
    private static final VarHandle LATEST_AT;
    /** {@link #latestAt} before any status succeeded. */
    private static final long NONE = Long.MIN_VALUE + 1;
    /** {@link #latestAt} once a status that succeeded could not tell when its copies ended (sticky). */
    private static final long UNKNOWN = TransferStatus.UNKNOWN_TIME;

    static {
        try {
            LATEST_AT = MethodHandles.lookup().findVarHandle(LastCopyEnd.class, "latestAt", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final TransferStatus[] statuses;
    /** The latest copy end seen, or {@link #NONE} or {@link #UNKNOWN}. */
    private volatile long latestAt = NONE;

    LastCopyEnd(TransferStatus[] statuses) {
        this.statuses = statuses;
    }

    /** Status {@code index} succeeded: kept if its copies ended last so far. */
    void succeeded(int index) {
        if (latestAt != UNKNOWN) {
            keep(endOf(index));
        }
    }

    /**
     * Statuses succeeded whose copies ended last at {@code at}, as {@link #later} folded their {@link #endOf}s: kept
     * if later than every one so far; one update for many statuses.
     */
    void keep(long at) {
        long seen = latestAt;
        if (seen == UNKNOWN || at == NONE) {
            return;
        }
        if (at == UNKNOWN) {
            latestAt = UNKNOWN;
            return;
        }
        while (seen != UNKNOWN && (seen == NONE || at - seen > 0)) {
            if (LATEST_AT.weakCompareAndSet(this, seen, at)) {
                return;
            }
            seen = latestAt;
        }
    }

    /**
     * Of two copy ends as {@link #endOf} reads them, or {@link #none()} for none yet, the later; unknown wins, as it
     * does in {@link #keep}.
     */
    static long later(long a, long b) {
        if (a == UNKNOWN || b == UNKNOWN) {
            return UNKNOWN;
        }
        if (a == NONE) {
            return b;
        }
        return b == NONE || a - b > 0 ? a : b;
    }

    /** The copy end that {@link #later} folds from: none yet. */
    static long none() {
        return NONE;
    }

    /**
     * Every status succeeded: gives {@code tally} the detection lag. When one could not tell when its copies ended as it
     * settled, reads every status again, since a backend may learn a copy's end a little after the status settles.
     */
    void lag(WaitTally tally) {
        long at = latestAt;
        if (at == UNKNOWN) {
            tally.lag(statuses);
        } else {
            tally.lagOf(at == NONE ? null : statuses[0], at);
        }
    }

    /** When status {@code index}'s copies ended, or {@link TransferStatus#UNKNOWN_TIME} (also if it throws). */
    long endOf(int index) {
        try {
            return statuses[index].completedAtNanos();
        } catch (RuntimeException broken) {
            return UNKNOWN;
        }
    }
}
