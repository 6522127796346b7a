package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * MoRI IO's {@code WaitAll} over statuses that complete only when queried, as on its xGMI backend: nobody
 * notifies the waiter, so a bounded wait on a status still in flight polls it once, sleeps to the
 * deadline, and polls again. Kept exact, because that is the legacy behaviour kvflux is measured against.
 */
final class MoriWaitAll {

    /** Monotonic time and sleeping, replaceable in tests. */
    interface Clock {
        long nanoTime();

        /**
         * Sleeps until {@code deadlineNanos} on this clock (nothing but an interrupt wakes it earlier).
         *
         * @return false if the thread was interrupted (its interrupt flag stays set)
         */
        boolean sleepUntil(long deadlineNanos);

        Clock SYSTEM = new Clock() {
            @Override
            public long nanoTime() {
                return System.nanoTime();
            }

            @Override
            public boolean sleepUntil(long deadlineNanos) {
                long left;
                while ((left = deadlineNanos - System.nanoTime()) > 0) {
                    LockSupport.parkNanos(left);
                    if (Thread.currentThread().isInterrupted()) {
                        return false;
                    }
                }
                return true;
            }
        };
    }

    /** A status that can block until it is terminal (MoRI's wait callback, {@code *EventSynchronize}). */
    interface Blocking {
        void awaitTerminal();
    }

    private final Clock clock;

    MoriWaitAll(Clock clock) {
        this.clock = clock;
    }

    /**
     * See {@link dev.kvflux.bindings.TransferEngine#waitAll}. An interrupt ends a sleep: the wait then
     * returns what one more poll finds (IN_PROGRESS while a status is in flight), with the thread's
     * interrupt flag still set, so a cancelled wait gives its thread back at once.
     */
    StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        if (statuses.isEmpty()) {
            return StatusCode.SUCCESS;
        }
        if (timeoutMs == 0) {
            return pollOnce(statuses);
        }
        if (timeoutMs < 0) {
            StatusCode first = StatusCode.SUCCESS;
            for (TransferStatus status : statuses) {
                StatusCode code = blockingWait(status);
                if (code == StatusCode.IN_PROGRESS) {
                    return code;
                }
                if (code.isFailure() && first == StatusCode.SUCCESS) {
                    first = code;
                }
            }
            return first;
        }
        long deadline = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        for (int i = 0; i < statuses.size(); i++) {
            TransferStatus status = statuses.get(i);
            if (status == null) {
                continue;
            }
            StatusCode code = waitFor(status, deadline);
            if (code.isFailure() || code == StatusCode.INIT) {
                return code == StatusCode.INIT ? StatusCode.ERR_BAD_STATE : code;
            }
            if (code == StatusCode.IN_PROGRESS) {
                StatusCode laterFailure = pollOnce(statuses.subList(i + 1, statuses.size()));
                return laterFailure.isFailure() ? laterFailure : StatusCode.IN_PROGRESS;
            }
        }
        return StatusCode.SUCCESS;
    }

    /** MoRI's {@code WaitFor} with a deadline: poll, then sleep to the deadline and poll, until terminal. */
    private StatusCode waitFor(TransferStatus status, long deadline) {
        StatusCode code = status.code();
        while (code == StatusCode.IN_PROGRESS) {
            if (clock.nanoTime() - deadline >= 0) {
                break;
            }
            boolean slept = clock.sleepUntil(deadline);
            code = status.code();
            if (!slept) {
                break;
            }
        }
        return code;
    }

    private static StatusCode pollOnce(List<? extends TransferStatus> statuses) {
        boolean inFlight = false;
        for (TransferStatus status : statuses) {
            if (status == null) {
                continue;
            }
            StatusCode code = status.code();
            if (code == StatusCode.INIT) {
                return StatusCode.ERR_BAD_STATE;
            }
            if (code.isFailure()) {
                return code;
            }
            inFlight |= code == StatusCode.IN_PROGRESS;
        }
        return inFlight ? StatusCode.IN_PROGRESS : StatusCode.SUCCESS;
    }

    private StatusCode blockingWait(TransferStatus status) {
        if (status == null) {
            return StatusCode.SUCCESS;
        }
        StatusCode code = status.code();
        if (code == StatusCode.INIT) {
            return StatusCode.ERR_BAD_STATE;
        }
        if (code == StatusCode.IN_PROGRESS && status instanceof Blocking blocking) {
            blocking.awaitTerminal();
            code = status.code();
        }
        while (code == StatusCode.IN_PROGRESS) {
            boolean slept = clock.sleepUntil(clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1));
            code = status.code();
            if (!slept) {
                break;
            }
        }
        return code;
    }
}
