package dev.kvflux.operators;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import reactor.core.Exceptions;
import reactor.core.scheduler.Scheduler;

/**
 * Hands the push waits that pushes end over to the scheduler in batches: the first wait to end while none is waiting
 * for the scheduler asks it for one task, and every wait that ends before that task runs joins it. The task signals
 * them one after another, in the order they ended. A pushing thread then pays one compare-and-set per wait it ends and
 * one task per batch, and one scheduler thread wakes per batch: at thousands of waits ending within milliseconds, one
 * task and one wake-up per wait made the backend's thread fall behind its pushes. Waits are linked through their own
 * fields, so handing one over allocates nothing.
 *
 * <p>A subscriber that throws does not keep the rest of its batch from their signals: the first throwable is
 * rethrown once the batch is done, for the scheduler to report as it reports a failed task. Should the scheduler
 * refuse the task, or accept it and never run it (shut down meanwhile), the waits are signalled on a pushing thread:
 * at once when it refuses, and otherwise when a wait is handed over to a batch whose scheduler is disposed or that is
 * older than {@value #STUCK_MILLIS} ms.
 */
final class SignalBatcher {
    private static final VarHandle HEAD;

    static {
        try {
            HEAD = MethodHandles.lookup().findVarHandle(SignalBatcher.class, "head", PushBarrier.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** How old a batch may grow before a wait handed over signals it on its own thread. */
    static final long STUCK_MILLIS = 100;

    /** The clock the batches are timed on, in nanoseconds ({@link System#nanoTime()} but in tests). */
    private final LongSupplier clock;
    /** Waits ended and not yet signalled, newest first; null when none. */
    private volatile PushBarrier head;
    /** The scheduler's task: signals a batch, then rethrows the first throwable a subscriber threw. */
    private final Runnable task = () -> {
        Throwable thrown = drain();
        if (thrown instanceof RuntimeException e) {
            throw e;
        } else if (thrown instanceof Error e) {
            throw e;
        } else if (thrown != null) {
            throw Exceptions.propagate(thrown); // a checked exception thrown sneakily
        }
    };

    /** A batcher timing its batches on {@code clock} (nanoseconds). */
    SignalBatcher(LongSupplier clock) {
        this.clock = clock;
    }

    /** {@code ended} is over: signals it on {@code on}, with the others that end before the task runs. */
    void hand(PushBarrier ended, Scheduler on) {
        long now = clock.getAsLong();
        PushBarrier seen;
        do {
            seen = head;
            ended.nextToSignal = seen;
            ended.batchSince = seen == null ? now : seen.batchSince;
            ended.batchOn = seen == null ? on : seen.batchOn;
        } while (!HEAD.compareAndSet(this, seen, ended));
        if (seen == null) {
            try {
                on.schedule(task);
            } catch (Throwable refused) {
                Exceptions.throwIfJvmFatal(refused);
                drainReporting(); // the scheduler is shut down or broken: nothing else will signal them
            }
        } else if (ended.batchOn.isDisposed() || now - ended.batchSince > TimeUnit.MILLISECONDS.toNanos(STUCK_MILLIS)) {
            drainReporting(); // the batch's task has not run: its scheduler is shut down, or dropped it
        }
    }

    /** Signals the waits handed over so far on this thread, reporting what a subscriber threw to its handler. */
    private void drainReporting() {
        Throwable thrown = drain();
        if (thrown != null) {
            Thread thread = Thread.currentThread();
            thread.getUncaughtExceptionHandler().uncaughtException(thread, thrown);
        }
    }

    /**
     * Signals every wait handed over so far, the earliest ended first, each whatever the ones before it threw; returns
     * the first throwable, the others suppressed in it, or null.
     */
    private Throwable drain() {
        PushBarrier newestFirst = (PushBarrier) HEAD.getAndSet(this, (PushBarrier) null);
        PushBarrier oldestFirst = null;
        while (newestFirst != null) {
            PushBarrier next = newestFirst.nextToSignal;
            newestFirst.nextToSignal = oldestFirst;
            oldestFirst = newestFirst;
            newestFirst = next;
        }
        Throwable first = null;
        while (oldestFirst != null) {
            PushBarrier next = oldestFirst.nextToSignal;
            oldestFirst.nextToSignal = null;
            try {
                oldestFirst.signalHandedOver();
            } catch (Throwable e) {
                if (first == null) {
                    first = e;
                } else if (first != e) {
                    first.addSuppressed(e);
                }
            }
            oldestFirst = next;
        }
        return first;
    }
}
