package dev.kvflux.operators;

import java.time.Duration;

/**
 * A wait's stall clock: when it last saw progress (a status leaving flight) and how long it has gone without
 * since, against its stall time ({@link WaitSpec#stallAfter()}). Times are nanoseconds of the wait's scheduler
 * clock, given by the caller. Made only when stall detection is on.
 *
 * <p>No locks: the last progress is one volatile field, so progress may be marked from any thread (a push
 * wait's backend thread) and read by the stall check on another.
 */
final class StallClock {
    private final Duration stallAfter;
    private volatile long lastProgressNanos;

    /** A clock that counts from {@code nowNanos}, as if progress had just been seen. */
    StallClock(Duration stallAfter, long nowNanos) {
        this.stallAfter = stallAfter;
        lastProgressNanos = nowNanos;
    }

    Duration stallAfter() {
        return stallAfter;
    }

    long stallAfterNanos() {
        return stallAfter.toNanos();
    }

    /** Progress was seen at {@code nowNanos}. */
    void progressAt(long nowNanos) {
        lastProgressNanos = nowNanos;
    }

    /** How long, at {@code nowNanos}, since progress was last seen. */
    long idleFor(long nowNanos) {
        return nowNanos - lastProgressNanos;
    }

    /** Whether, at {@code nowNanos}, no progress has been seen for the stall time or longer. */
    boolean stalledAt(long nowNanos) {
        return untilStall(nowNanos) <= 0;
    }

    /** Nanoseconds from {@code nowNanos} until the wait stalls if nothing progresses; 0 or less once it has. */
    long untilStall(long nowNanos) {
        return stallAfterNanos() - idleFor(nowNanos);
    }
}
