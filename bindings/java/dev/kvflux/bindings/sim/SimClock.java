package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.internal.MoriWaitAll;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;

/**
 * The simulated engine's time, read from a Reactor {@link Scheduler} (or, in real time, from
 * {@link System#nanoTime()}), and a blocking sleep on that time.
 *
 * <p>A sleep schedules a wake-up on the scheduler at the deadline and blocks the calling thread on a
 * latch. On a real scheduler the wake-up fires in real time; on a {@code VirtualTimeScheduler} it fires
 * when another thread advances virtual time past the deadline. A scheduler that refuses delayed tasks
 * is handled by parking in real time. In {@linkplain #realTime() real time} a sleep parks the thread. {@link #close()} ends every sleep, now and later.
 */
final class SimClock implements TransferEngine.WaitClock {
    private final Scheduler scheduler;
    private final MoriWaitAll.SystemClock system;
    private final AtomicInteger sleepers = new AtomicInteger();
    private final Set<CountDownLatch> latches = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    /** Time is {@code scheduler}'s {@code now()}, and wake-ups are scheduled on it. */
    static SimClock of(Scheduler scheduler) {
        return new SimClock(scheduler, null);
    }

    /**
     * Real time with nanosecond resolution, as MoRI's {@code steady_clock}: {@link System#nanoTime()},
     * and a sleep parks the sleeping thread itself, as a condition variable's timed wait does. (Reactor's
     * own schedulers read the wall clock in whole milliseconds, which would make every bounded wait's
     * time left a whole number of milliseconds, and a wake-up scheduled on one arrives a millisecond or
     * more late on a busy machine.)
     */
    static SimClock realTime() {
        return new SimClock(null, MoriWaitAll.systemClock());
    }

    private SimClock(Scheduler scheduler, MoriWaitAll.SystemClock system) {
        this.scheduler = scheduler;
        this.system = system;
    }

    long now() {
        return system != null ? system.nanoTime() : scheduler.now(TimeUnit.NANOSECONDS);
    }

    @Override
    public long nanoTime() {
        return now();
    }

    int sleepers() {
        return sleepers.get();
    }

    /**
     * Blocks until the clock reads {@code deadline} or later ({@code Long.MAX_VALUE}: until interrupted
     * or closed).
     *
     * @return false if the thread was interrupted (its interrupt flag is set again) or the clock closed
     */
    @Override
    public boolean sleepUntil(long deadline) {
        if (system != null) {
            sleepers.incrementAndGet();
            try {
                return system.sleepUntil(deadline);
            } finally {
                sleepers.decrementAndGet();
            }
        }
        for (long now = now(); now < deadline; now = now()) {
            if (closed) {
                return false;
            }
            if (!sleepOnce(deadline - now)) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return !closed;
    }

    /** Ends every sleep on this clock, now and later. */
    void close() {
        closed = true;
        if (system != null) {
            system.close();
        }
        latches.forEach(CountDownLatch::countDown);
    }

    /** @return false if interrupted */
    private boolean sleepOnce(long nanos) {
        CountDownLatch latch = new CountDownLatch(1);
        Disposable wakeUp = null;
        if (nanos <= TimeUnit.DAYS.toNanos(365)) {
            // A deadline further off means "until interrupted or closed"; no scheduler timer is needed for it.
            try {
                wakeUp = scheduler.schedule(latch::countDown, nanos, TimeUnit.NANOSECONDS);
            } catch (RejectedExecutionException e) {
                LockSupport.parkNanos(nanos);
                return !Thread.interrupted();
            }
        }
        latches.add(latch);
        if (closed) {
            latch.countDown();
        }
        // Counted only once the wake-up is scheduled, so whoever sees the count may advance the clock.
        sleepers.incrementAndGet();
        try {
            latch.await();
            return true;
        } catch (InterruptedException e) {
            return false;
        } finally {
            sleepers.decrementAndGet();
            latches.remove(latch);
            if (wakeUp != null) {
                wakeUp.dispose();
            }
        }
    }
}
