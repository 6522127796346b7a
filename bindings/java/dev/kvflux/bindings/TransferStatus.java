package dev.kvflux.bindings;

/**
 * The state of one posted transfer or batch, as MoRI IO's {@code TransferStatus}.
 *
 * <p>{@link #code()} is non-blocking, and it may drive the transfer's progress: on MoRI's xGMI backend a
 * status becomes terminal only when something queries it after its copy finished. Implementations are
 * safe to query from any thread.
 */
public interface TransferStatus {

    /** What {@link #completedAtNanos()} answers when the backend cannot tell when the copies ended. */
    long UNKNOWN_TIME = Long.MIN_VALUE;

    /** The current code; queries the backend, which may complete the status. Never blocks. */
    StatusCode code();

    /** The message set with the last terminal code; empty while in flight. */
    String message();

    /**
     * When the backend saw this status's copies end, read on {@link #clockNanos()}'s clock, or
     * {@link #UNKNOWN_TIME} while the status is in flight or failed, or when the backend cannot tell
     * (the default). It is the time the copies ended, which may lie before the query that turned the status
     * SUCCESS: the gap between the two is the wait's detection lag. Queries nothing and never blocks.
     */
    default long completedAtNanos() {
        return UNKNOWN_TIME;
    }

    /**
     * How many bytes the batch behind this status moves, or -1 when the backend does not say (the default).
     * Waits that predict when copies end ({@code CompletionWait.adaptive}) read it.
     */
    default long bytes() {
        return -1;
    }

    /**
     * The clock {@link #completedAtNanos()} is read on, now, in nanoseconds: {@link System#nanoTime()}
     * unless the backend keeps time of its own (a simulated engine driven by a virtual-time scheduler
     * answers that scheduler's time). Only differences between two readings of one status's clock mean
     * anything.
     */
    default long clockNanos() {
        return System.nanoTime();
    }

    /**
     * How long ago, in nanoseconds and at least 0, the last of {@code statuses}' copies ended, each read on its own
     * status's clock; -1 when there are none, or when one cannot tell when its copies ended or throws. Call it once
     * every status is done: it is then the wait's detection lag.
     */
    static long sinceLastCopyEnd(Iterable<? extends TransferStatus> statuses) {
        long latest = 0;
        TransferStatus last = null;
        try {
            for (TransferStatus status : statuses) {
                long at = status.completedAtNanos();
                if (at == UNKNOWN_TIME) {
                    return -1;
                }
                if (last == null || at - latest > 0) {
                    latest = at;
                    last = status;
                }
            }
            return last == null ? -1 : Math.max(0, last.clockNanos() - latest);
        } catch (RuntimeException broken) {
            return -1;
        }
    }
}
