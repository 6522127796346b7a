package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;

/**
 * The timers of one {@link PushBarrier}: the poll of its statuses that do not push, once a slice; the transfer timeout's
 * last query; the stall check. Each runs on the wait's scheduler under the barrier's lock, and ends the wait through the
 * barrier.
 */
final class PushTimers {
    private final PushBarrier barrier;
    private final Scheduler on;
    private final WaitTally tally;
    private final Duration transferTimeout;
    private final Duration slice;
    /** When a status last settled; null when stall detection is off. */
    private final StallClock stall;
    /** Indexes of statuses that do not push and are still in flight; guarded by the barrier. */
    private final int[] polled;
    private int polledCount;
    private volatile Disposable poll;
    private volatile Disposable deadline;
    private volatile Disposable stallCheck;

    PushTimers(PushBarrier barrier, WaitSpec spec, StallClock stall, WaitTally tally, Scheduler on) {
        this.barrier = barrier;
        this.on = on;
        this.tally = tally;
        this.transferTimeout = spec.transferTimeout();
        this.slice = spec.slice();
        this.stall = stall;
        this.polled = new int[barrier.size()];
    }

    /** Status {@code index} does not push and is still in flight: the poll queries it. Only before {@link #arm}. */
    void poll(int index) {
        polled[polledCount++] = index;
    }

    /** Arms the poll (when a status needs it), the deadline and the stall check (when on). */
    void arm() {
        if (polledCount > 0) {
            poll = on.schedulePeriodically(this::pollTick, slice.toNanos(), slice.toNanos(), TimeUnit.NANOSECONDS);
        }
        deadline = on.schedule(this::atDeadline, transferTimeout.toNanos(), TimeUnit.NANOSECONDS);
        if (stall != null) {
            armStallCheck(stall.stallAfterNanos());
        }
    }

    /** Disposes the poll, the deadline and the stall check, those armed. */
    void dispose() {
        Disposable p = poll;
        if (p != null) {
            p.dispose();
        }
        Disposable d = deadline;
        if (d != null) {
            d.dispose();
        }
        Disposable s = stallCheck;
        if (s != null) {
            s.dispose();
        }
    }

    /** One slice: queries the statuses that do not push and are still in flight, compacting their indexes. */
    private void pollTick() {
        synchronized (barrier) {
            tally.polled(0);
            int kept = 0;
            for (int i = 0; i < polledCount && !barrier.isDone(); i++) {
                int index = polled[i];
                StatusCode code = barrier.query(index);
                if (code == null) {
                    return;
                }
                if (!code.isTerminal()) {
                    polled[kept++] = index;
                }
            }
            polledCount = kept;
        }
    }

    /** The timeout: one last query of every status not settled; a failure seen wins over the timeout. */
    private void atDeadline() {
        synchronized (barrier) {
            boolean inFlight = queryUnsettled();
            if (!barrier.isDone()) {
                barrier.finish(inFlight && !barrier.sawFailure() ? TransferException.timedOut(transferTimeout) : null,
                        false);
            }
        }
    }

    /**
     * Queries every status not yet settled once; whether some are still in flight. A status that settles here counts
     * as it would from a push or a poll (it may end the wait); one that breaks the contract ends the wait.
     */
    private boolean queryUnsettled() {
        tally.polled(0);
        boolean inFlight = false;
        for (int i = 0; i < barrier.size() && !barrier.isDone(); i++) {
            if (barrier.codeOf(i) != null) {
                continue;
            }
            StatusCode code = barrier.query(i);
            if (code == null) {
                return false;
            }
            inFlight |= !code.isTerminal();
        }
        return inFlight;
    }

    /** Schedules the stall check {@code delayNanos} from now; disposed with the other timers. */
    private void armStallCheck(long delayNanos) {
        stallCheck = on.schedule(this::stallCheck, delayNanos, TimeUnit.NANOSECONDS);
        if (barrier.isDone()) {
            dispose();
        }
    }

    /**
     * The stall check, due {@code stallAfter} after the last status settled: when nothing has settled since, one last
     * query of every status not settled, then (still nothing) the stall error, or with drain a failure already seen.
     * Progress since re-arms it for {@code stallAfter} after that progress.
     */
    private void stallCheck() {
        synchronized (barrier) {
            if (barrier.isDone()) {
                return;
            }
            long left = stall.untilStall(on.now(TimeUnit.NANOSECONDS));
            if (left > 0) {
                armStallCheck(left);
                return;
            }
            boolean inFlight = queryUnsettled();
            if (barrier.isDone()) {
                return;
            }
            left = stall.untilStall(on.now(TimeUnit.NANOSECONDS));
            if (!inFlight || left > 0) {
                armStallCheck(left > 0 ? left : stall.stallAfterNanos()); // the query settled some: that is progress
                return;
            }
            barrier.finish(barrier.sawFailure() ? null
                    : TransferException.stalled(stall.stallAfter(), barrier.unsettled(), barrier.size()), false);
        }
    }
}
