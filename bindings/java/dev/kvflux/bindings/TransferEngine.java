package dev.kvflux.bindings;

import dev.kvflux.bindings.internal.MoriWaitAll;
import java.util.List;

/**
 * A transfer engine shaped like MoRI IO's {@code IOEngine}: it owns memory registrations and sessions,
 * and it has MoRI's native bounded wait.
 */
public interface TransferEngine extends AutoCloseable {

    /** The backend's name as the CLI and reports print it ({@code sim-xgmi}, {@code native-sim}, {@code cuda}). */
    String backend();

    /** Registers {@code size} bytes on {@code device} (-1 for host memory) and returns the region. */
    MemoryRegion registerMemory(long size, int device);

    /** A session from a region this engine registered to a region the peer registered. */
    TransferSession createSession(MemoryRegion local, MemoryRegion remote);

    /**
     * MoRI's {@code WaitAll}: an empty list is SUCCESS; {@code timeoutMs == 0} polls each status once
     * (first failure wins, else IN_PROGRESS if any is in flight, else SUCCESS); {@code timeoutMs < 0}
     * blocks until every status is terminal and returns the first failure; {@code timeoutMs > 0} waits
     * the statuses in order against one deadline, each for the time left truncated to whole
     * milliseconds, and returns IN_PROGRESS as soon as one is still in flight after its wait or the
     * deadline has passed, a failure seen before then taking precedence. A status never posted (INIT) is the
     * failure ERR_BAD_STATE. An engine written in Java over statuses that complete only when queried gets this
     * wait from {@link #moriWaitAll}.
     *
     * <p>Blocks the calling thread: never call it on a non-blocking Reactor thread.
     */
    StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs);

    @Override
    void close();

    /**
     * MoRI's {@code WaitAll}, exactly as {@link #waitAll} describes it, over statuses that complete only when
     * queried (as on MoRI's xGMI backend, where nobody notifies a waiter), for an engine written in Java: time is
     * read and slept on {@code clock}, and an unbounded wait ({@code timeoutMs < 0}) sleeps one millisecond of it
     * between queries of a status in flight. A sleep cut short ends the wait with what one more query finds.
     * kvflux's simulated and GPU engines wait this way.
     *
     * <p>Blocks the calling thread; thread-safe if the clock and the statuses are.
     */
    static StatusCode moriWaitAll(List<? extends TransferStatus> statuses, long timeoutMs, WaitClock clock) {
        return new MoriWaitAll(clock).waitAll(statuses, timeoutMs);
    }

    /** Monotonic time in nanoseconds and a sleep on it, for {@link #moriWaitAll}. */
    interface WaitClock {
        long nanoTime();

        /**
         * Sleeps until this clock reads {@code deadlineNanos} or later.
         *
         * @return false if the sleep was cut short: the thread was interrupted (its interrupt flag is
         *         set on return) or the clock was closed
         */
        boolean sleepUntil(long deadlineNanos);
    }
}
