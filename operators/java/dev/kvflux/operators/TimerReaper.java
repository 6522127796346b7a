package dev.kvflux.operators;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import reactor.core.scheduler.Scheduler;

/**
 * Disposes the timers of push waits that ended on a pushing thread: at once where waits end sparsely (more than
 * {@value #GATHER_MICROS} µs apart), else later and in batches, on the wait's scheduler.
 * Disposing a timer takes the scheduler's queue lock and reorders its heap, which at thousands of waits in flight
 * costs the pushing thread microseconds per wait; the backend's thread then falls behind its other pushes. A timer
 * that fires before it is disposed finds its wait done and queries nothing. Waits are linked through their own field,
 * so handing one over allocates nothing. Should a batch's disposal never run (its scheduler shut down after it was
 * asked), the first wait handed over once the batch is {@value #STUCK_MILLIS} ms old disposes the batch itself.
 */
final class TimerReaper {
    private static final VarHandle HEAD;

    static {
        try {
            HEAD = MethodHandles.lookup().findVarHandle(TimerReaper.class, "head", PushBarrier.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * How long a batch gathers before its timers are disposed: a wait's timers outlive it by at most this, and the
     * scheduler is asked once per batch, not once per wait.
     */
    private static final long GATHER_MICROS = 1_000;

    /** How old a batch may grow before a wait handed over disposes it on its own thread. */
    private static final long STUCK_MILLIS = 100;

    /** The clock the batches are timed on, in nanoseconds ({@link System#nanoTime()} but in tests). */
    private final LongSupplier clock;
    /** Waits whose timers are still to be disposed, newest first; null when none. */
    private volatile PushBarrier head;
    /** When the current batch began, on {@link #clock}. */
    private volatile long batchSince;
    /**
     * When a wait was last handed over, on {@link #clock}; written racily by the pushing threads, as it only
     * tells sparse ends from dense ones.
     */
    private volatile long lastReap;

    /** A reaper timing its batches on {@code clock} (nanoseconds). */
    TimerReaper(LongSupplier clock) {
        this.clock = clock;
        this.lastReap = clock.getAsLong() - TimeUnit.SECONDS.toNanos(1);
    }

    /** Hands over {@code done}'s timers; the first wait of a batch schedules their disposal on {@code on}, a little later. */
    void reap(PushBarrier done, Scheduler on) {
        long now = clock.getAsLong();
        long previous = lastReap;
        lastReap = now;
        if (head == null && now - previous > TimeUnit.MICROSECONDS.toNanos(GATHER_MICROS)) {
            // Waits end sparsely: disposing here is one uncontended lock, while asking the scheduler for a drain
            // would wake its thread (a new earliest deadline) on the pushing thread's time.
            done.disposeTimers();
            return;
        }
        PushBarrier seen;
        do {
            seen = head;
            done.nextToReap = seen;
        } while (!HEAD.compareAndSet(this, seen, done));
        if (seen == null) {
            batchSince = now;
            try {
                on.schedule(this::drain, GATHER_MICROS, TimeUnit.MICROSECONDS);
            } catch (RejectedExecutionException e) {
                drain(); // the scheduler is shut down: its timers are gone with it, and this costs nothing more
            }
        } else if (now - batchSince > TimeUnit.MILLISECONDS.toNanos(STUCK_MILLIS)) {
            drain(); // the batch's disposal has not run: its scheduler dropped it
        }
    }

    /** Disposes every wait's timers handed over so far. */
    private void drain() {
        PushBarrier batch = (PushBarrier) HEAD.getAndSet(this, (PushBarrier) null);
        while (batch != null) {
            PushBarrier next = batch.nextToReap;
            batch.nextToReap = null;
            batch.disposeTimers();
            batch = next;
        }
    }
}
