package dev.kvflux.bindings.sim;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;

/**
 * The simulated engine's time, read from a Reactor {@link Scheduler}, and a blocking sleep on that time.
 *
 * <p>A sleep schedules a wake-up on the scheduler at the deadline and blocks the calling thread on a
 * latch. On a real scheduler the wake-up fires in real time; on a {@code VirtualTimeScheduler} it fires
 * when another thread advances virtual time past the deadline. A scheduler that refuses delayed tasks
 * is handled by parking in real time.
 */
final class SimClock {
    private final Scheduler scheduler;
    private final AtomicInteger sleepers = new AtomicInteger();

    SimClock(Scheduler scheduler) {
        this.scheduler = scheduler;
    }

    long now() {
        return scheduler.now(TimeUnit.NANOSECONDS);
    }

    int sleepers() {
        return sleepers.get();
    }

    /**
     * Blocks until the clock reads {@code deadline} or later ({@code Long.MAX_VALUE}: until interrupted).
     *
     * @return false if the thread was interrupted (its interrupt flag is set again)
     */
    boolean sleepUntil(long deadline) {
        for (long now = now(); now < deadline; now = now()) {
            if (!sleepOnce(deadline - now)) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    private boolean sleepOnce(long nanos) {
        if (nanos > TimeUnit.DAYS.toNanos(365)) {
            // A deadline this far off means "until interrupted"; no scheduler timer is needed for it.
            sleepers.incrementAndGet();
            try {
                new CountDownLatch(1).await();
            } catch (InterruptedException e) {
                return false;
            } finally {
                sleepers.decrementAndGet();
            }
        }
        CountDownLatch latch = new CountDownLatch(1);
        Disposable wakeUp;
        try {
            wakeUp = scheduler.schedule(latch::countDown, nanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            LockSupport.parkNanos(nanos);
            return !Thread.interrupted();
        }
        // Counted only once the wake-up is scheduled, so whoever sees the count may advance the clock.
        sleepers.incrementAndGet();
        try {
            latch.await();
            return true;
        } catch (InterruptedException e) {
            wakeUp.dispose();
            return false;
        } finally {
            sleepers.decrementAndGet();
        }
    }
}
