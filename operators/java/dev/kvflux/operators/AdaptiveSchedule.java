package dev.kvflux.operators;

import java.time.Duration;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * When an adaptive wait ({@link CompletionWait#adaptive(CopyRate)}) polls: every slice, except in a window around
 * the predicted end of the copies, where it polls every {@link #densePeriod}; and, once it has ended, how long the
 * copies took as it saw them. Times are counted as the sum of the delays it has scheduled on the wait's scheduler
 * (so that virtual time drives it), from the subscription.
 *
 * <p>The window is the predicted end ± a sixteenth of the predicted time, at least {@link #MIN_MARGIN} either side:
 * a wait whose prediction is good enough costs its slice polls plus a few dozen dense ones, and ends within a
 * dense period of the last copy. Used by one wait, from one thread at a time (the ticks are sequential).
 */
final class AdaptiveSchedule {
    /** The least half-width of the dense window. */
    static final Duration MIN_MARGIN = Duration.ofMillis(1);
    /** The fewest nanoseconds between two dense polls. */
    private static final long MIN_DENSE_NANOS = 100_000;

    private final long slice;
    private final long dense;
    private final long denseFrom;
    private final long denseUntil;
    private long elapsed;
    private long lastDelay;

    private AdaptiveSchedule(long slice, long denseFrom, long denseUntil) {
        this.slice = slice;
        this.dense = densePeriod(slice);
        this.denseFrom = denseFrom;
        this.denseUntil = denseUntil;
    }

    /** A twentieth of the slice, at least 0.1 ms: 0.5 ms at the default 10 ms slice. */
    static long densePeriod(long sliceNanos) {
        return Math.max(MIN_DENSE_NANOS, sliceNanos / 20);
    }

    /** Polls every slice around the copies' end predicted {@code predictedNanos} from now, or every slice if unknown (-1). */
    static AdaptiveSchedule around(Duration slice, long predictedNanos) {
        long s = slice.toNanos();
        if (predictedNanos < 0) {
            return new AdaptiveSchedule(s, Long.MAX_VALUE, Long.MAX_VALUE);
        }
        long margin = Math.max(MIN_MARGIN.toNanos(), predictedNanos / 16);
        return new AdaptiveSchedule(s, Math.max(0, predictedNanos - margin), predictedNanos + margin);
    }

    /** The next delay, and counts it as elapsed. */
    long next() {
        long d;
        if (elapsed < denseFrom) {
            d = Math.min(slice, denseFrom - elapsed);
        } else if (elapsed < denseUntil) {
            d = dense;
        } else {
            d = slice;
        }
        elapsed += d;
        lastDelay = d;
        return d;
    }

    /** The polls' ticks on {@code on}, forever (the wait takes them until it has settled). */
    Flux<Long> ticks(Scheduler on) {
        return Mono.defer(() -> Mono.delay(Duration.ofNanos(next()), on)).repeat();
    }

    /**
     * Once the poll just made saw the last status settle: how long after the subscription the copies ended, taken
     * halfway between that poll and the one before it.
     */
    long endedAfterNanos() {
        return elapsed - lastDelay / 2;
    }
}
