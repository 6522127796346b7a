package dev.kvflux.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.scheduler.Scheduler;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * A scheduler over another (virtual time, in the tests) that counts the tasks handed to it without delay and keeps
 * the handles of those with one. {@link #holding} makes it keep the tasks without delay until {@link #runHeld};
 * {@link #refusing} and {@link #disposed} make it act as one that is shut down.
 */
public final class RecordingScheduler implements Scheduler {
    private final Scheduler delegate;
    private final boolean hold;
    /** Tasks handed over without delay. */
    public final AtomicInteger immediate = new AtomicInteger();
    /** Those still held ({@link #holding} only). */
    public final List<Runnable> held = new CopyOnWriteArrayList<>();
    /** The handles of the tasks handed over with a delay, in order. */
    public final List<Disposable> delayed = new CopyOnWriteArrayList<>();
    /** The handles of the periodic tasks, in order: a virtual-time periodic task does not tell whether it was disposed. */
    public final List<Disposable> periodic = new CopyOnWriteArrayList<>();
    /** Whether it refuses every task without delay, as a shut-down scheduler does. */
    public volatile boolean refusing;
    /** What {@link #isDisposed} says. */
    public volatile boolean disposed;

    private RecordingScheduler(Scheduler delegate, boolean hold) {
        this.delegate = delegate;
        this.hold = hold;
    }

    /** Running the tasks without delay at once, on {@code delegate}. */
    public static RecordingScheduler over(Scheduler delegate) {
        return new RecordingScheduler(delegate, false);
    }

    /** Holding the tasks without delay until {@link #runHeld}, the others on {@code delegate}. */
    public static RecordingScheduler holding(VirtualTimeScheduler delegate) {
        return new RecordingScheduler(delegate, true);
    }

    /** Runs the tasks held so far, in order, on the calling thread; a task that throws stops the rest. */
    public void runHeld() {
        List<Runnable> now = new ArrayList<>(held);
        held.clear();
        now.forEach(Runnable::run);
    }

    @Override
    public Disposable schedule(Runnable task) {
        if (refusing) {
            throw new RejectedExecutionException("shut down");
        }
        immediate.incrementAndGet();
        if (!hold) {
            return delegate.schedule(task);
        }
        held.add(task);
        return () -> held.remove(task);
    }

    @Override
    public Disposable schedule(Runnable task, long delay, TimeUnit unit) {
        Disposable scheduled = delegate.schedule(task, delay, unit);
        delayed.add(scheduled);
        return scheduled;
    }

    @Override
    public Disposable schedulePeriodically(Runnable task, long initialDelay, long period, TimeUnit unit) {
        Disposable scheduled = Disposables.composite(delegate.schedulePeriodically(task, initialDelay, period, unit));
        periodic.add(scheduled);
        return scheduled;
    }

    @Override
    public long now(TimeUnit unit) {
        return delegate.now(unit);
    }

    @Override
    public boolean isDisposed() {
        return disposed;
    }

    @Override
    public Worker createWorker() {
        return delegate.createWorker();
    }
}
