package dev.kvflux.bindings.internal;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine.WaitClock;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * MoRI IO's {@code IOEngine::WaitAll}, exactly, over statuses that complete only when queried (as on
 * MoRI's xGMI backend, where nobody notifies a waiter): the legacy behaviour kvflux is measured against,
 * shared by every Java engine.
 *
 * <p>A bounded wait ({@code timeoutMs > 0}) takes one deadline and waits the statuses in order. Before
 * each it stops with IN_PROGRESS if the deadline has passed; otherwise it gives the status
 * {@code WaitFor(remaining)}, where {@code remaining} is the time left <em>truncated to whole
 * milliseconds</em>. {@code WaitFor} polls once, and while the status is in flight sleeps to its own
 * deadline ({@code now + remaining}) and polls again. A status still in flight after its
 * {@code WaitFor} ends the wait with IN_PROGRESS. A failure is remembered (the first one) and the wait
 * goes on; it takes precedence over IN_PROGRESS, and over SUCCESS at the end.
 *
 * <p>Because of the truncation, the first status still in flight sleeps to just under the deadline (the
 * whole timeout when no time passed since the deadline was taken), and the statuses after it are polled
 * once each in what is left of the last millisecond: whether they fit decides between SUCCESS just under
 * the deadline and IN_PROGRESS, although every copy finished long before.
 *
 * <p>{@code timeoutMs == 0} polls each status once: the first failure is returned at once, else
 * IN_PROGRESS if one is in flight, else SUCCESS. {@code timeoutMs < 0} blocks on every status in turn
 * until it is terminal ({@link Blocker}) and returns the first failure. Null entries are skipped; an
 * empty list is SUCCESS; a status never posted (INIT) counts as the failure ERR_BAD_STATE.
 *
 * <p>A sleep cut short (the thread interrupted, or the clock closed) ends the wait: it returns what one
 * more poll finds (IN_PROGRESS while that status is in flight), and an interrupted thread keeps its
 * interrupt flag, so a cancelled wait gives its thread back at once.
 *
 * <p>Thread-safe if the clock and the statuses are; blocks the calling thread.
 *
 * <p>An engine's blocking algorithm, not API: kvflux's engines use it, and an engine outside the bindings gets
 * it through {@link TransferEngine#moriWaitAll}.
 */
public final class MoriWaitAll {
    private static final long MILLI = TimeUnit.MILLISECONDS.toNanos(1);

    /**
     * What an unbounded wait ({@code timeoutMs < 0}) does with a status found in flight: block until it
     * may have changed, for example MoRI's wait callback (an event synchronize), or a sleep to when the
     * status is due. The wait polls the status after each call, and calls again while it is in flight.
     */
    @FunctionalInterface
    public interface Blocker {
        /** @return false if the block was cut short (interrupt or close); the wait then stops */
        boolean awaitChange(TransferStatus status);
    }

    private final WaitClock clock;
    private final Blocker blocker;

    /** MoRI's wait on {@code clock}; an unbounded wait polls an in-flight status every millisecond. */
    public MoriWaitAll(WaitClock clock) {
        this(clock, null);
    }

    /** MoRI's wait on {@code clock}, with {@code blocker} for the unbounded wait. */
    public MoriWaitAll(WaitClock clock, Blocker blocker) {
        this.clock = Objects.requireNonNull(clock, "clock");
        this.blocker = blocker != null ? blocker : status -> clock.sleepUntil(clock.nanoTime() + MILLI);
    }

    /** A clock on {@link System#nanoTime()} whose {@link SystemClock#close()} ends every sleep on it. */
    public static SystemClock systemClock() {
        return new SystemClock();
    }

    /** See the class comment and {@link TransferEngine#waitAll}. */
    public StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        Objects.requireNonNull(statuses, "statuses");
        if (statuses.isEmpty()) {
            return StatusCode.SUCCESS;
        }
        if (timeoutMs == 0) {
            return pollEachOnce(statuses);
        }
        if (timeoutMs < 0) {
            return blockOnEach(statuses);
        }
        long deadline = after(clock.nanoTime(), timeoutMs);
        StatusCode firstFailure = StatusCode.SUCCESS;
        for (TransferStatus status : statuses) {
            if (status == null) {
                continue;
            }
            long now = clock.nanoTime();
            if (now >= deadline) {
                return orInProgress(firstFailure);
            }
            StatusCode code = waitFor(status, truncatedMillis(deadline - now));
            if (code == StatusCode.IN_PROGRESS) {
                return orInProgress(firstFailure);
            }
            if (code != StatusCode.SUCCESS && firstFailure == StatusCode.SUCCESS) {
                firstFailure = code;
            }
        }
        return firstFailure;
    }

    /** The time left, in whole milliseconds (truncated, as {@code duration_cast} does), at most int's max. */
    private static int truncatedMillis(long nanosLeft) {
        return (int) Math.min(nanosLeft / MILLI, Integer.MAX_VALUE);
    }

    /** {@code now} plus {@code ms} milliseconds, saturated at {@code Long.MAX_VALUE}. */
    private static long after(long now, long ms) {
        long nanos = ms > Long.MAX_VALUE / MILLI ? Long.MAX_VALUE : ms * MILLI;
        return now > Long.MAX_VALUE - nanos ? Long.MAX_VALUE : now + nanos;
    }

    /** MoRI's {@code TransferStatus::WaitFor(ms >= 0)}: poll; while in flight, sleep to its deadline and poll. */
    private StatusCode waitFor(TransferStatus status, int timeoutMs) {
        StatusCode code = query(status);
        if (code != StatusCode.IN_PROGRESS || timeoutMs == 0) {
            return code;
        }
        long deadline = after(clock.nanoTime(), timeoutMs);
        while (code == StatusCode.IN_PROGRESS && clock.nanoTime() < deadline) {
            boolean slept = clock.sleepUntil(deadline);
            code = query(status);
            if (!slept) {
                break;
            }
        }
        return code;
    }

    private static StatusCode pollEachOnce(List<? extends TransferStatus> statuses) {
        boolean inFlight = false;
        for (TransferStatus status : statuses) {
            if (status == null) {
                continue;
            }
            StatusCode code = query(status);
            if (code == StatusCode.IN_PROGRESS) {
                inFlight = true;
            } else if (code != StatusCode.SUCCESS) {
                return code;
            }
        }
        return inFlight ? StatusCode.IN_PROGRESS : StatusCode.SUCCESS;
    }

    private StatusCode blockOnEach(List<? extends TransferStatus> statuses) {
        StatusCode firstFailure = StatusCode.SUCCESS;
        for (TransferStatus status : statuses) {
            if (status == null) {
                continue;
            }
            StatusCode code = query(status);
            while (code == StatusCode.IN_PROGRESS) {
                boolean blocked = blocker.awaitChange(status);
                code = query(status);
                if (!blocked && code == StatusCode.IN_PROGRESS) {
                    return StatusCode.IN_PROGRESS;
                }
            }
            if (code != StatusCode.SUCCESS && firstFailure == StatusCode.SUCCESS) {
                firstFailure = code;
            }
        }
        return firstFailure;
    }

    /** One query; a status never posted is the failure ERR_BAD_STATE. */
    private static StatusCode query(TransferStatus status) {
        StatusCode code = status.code();
        return code == StatusCode.INIT ? StatusCode.ERR_BAD_STATE : code;
    }

    private static StatusCode orInProgress(StatusCode firstFailure) {
        return firstFailure != StatusCode.SUCCESS ? firstFailure : StatusCode.IN_PROGRESS;
    }

    /**
     * {@link System#nanoTime()} and parking, for engines on real hardware. {@link #close()} ends every
     * sleep in progress and every later one at once (they return false).
     */
    public static final class SystemClock implements WaitClock, AutoCloseable {
        private final Set<Thread> sleepers = ConcurrentHashMap.newKeySet();
        private volatile boolean closed;

        private SystemClock() {
        }

        @Override
        public long nanoTime() {
            return System.nanoTime();
        }

        @Override
        public boolean sleepUntil(long deadlineNanos) {
            Thread me = Thread.currentThread();
            sleepers.add(me);
            try {
                long left;
                while ((left = deadlineNanos - System.nanoTime()) > 0) {
                    if (closed || me.isInterrupted()) {
                        return false;
                    }
                    LockSupport.parkNanos(this, left);
                }
                return !closed && !me.isInterrupted();
            } finally {
                sleepers.remove(me);
            }
        }

        /** Ends every sleep on this clock, now and later. */
        @Override
        public void close() {
            closed = true;
            sleepers.forEach(LockSupport::unpark);
        }
    }
}
