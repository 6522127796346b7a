package dev.kvflux.testing;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.scheduler.Scheduler;

/**
 * What the tests' pushing statuses share: a code that the test (or its schedule) settles, when its copies ended, and a
 * count of the queries a wait made. How the push reaches the wait is the subclass's.
 */
public abstract class CountedStatus implements PushedStatus {
    /** The code; a test may set it before a wait subscribes, as a status settled earlier. */
    public volatile StatusCode code = StatusCode.IN_PROGRESS;
    /** When its copies ended, on {@link #clockNanos()}'s clock; {@link #UNKNOWN_TIME} until known. */
    public volatile long endNanos = UNKNOWN_TIME;
    /** How many times a wait asked its {@link #code()}. */
    public final AtomicInteger queries = new AtomicInteger();
    private final Scheduler clock;

    /** A status on {@code clock}'s time, or on {@link System#nanoTime()} when it is null. */
    protected CountedStatus(Scheduler clock) {
        this.clock = clock;
    }

    @Override
    public StatusCode code() {
        queries.incrementAndGet();
        return code;
    }

    @Override
    public String message() {
        return code.isFailure() ? "copy failed" : "";
    }

    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? endNanos : UNKNOWN_TIME;
    }

    @Override
    public long clockNanos() {
        return clock == null ? System.nanoTime() : clock.now(TimeUnit.NANOSECONDS);
    }
}
