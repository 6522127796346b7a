package dev.kvflux.operators;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.RejectedExecutionException;
import reactor.core.scheduler.Scheduler;

/**
 * Hands the push waits that pushes end over to the scheduler in batches: the first wait to end while none is waiting
 * for the scheduler asks it for one task, and every wait that ends before that task runs joins it. The task signals
 * them in the order they ended. A pushing thread then pays one atomic update per wait it ends and one task per
 * batch, and one scheduler thread wakes per batch: at thousands of waits ending within milliseconds, one task and one
 * wake-up per wait made the backend's thread fall behind its pushes. Waits are linked through their own field, so
 * handing one over allocates nothing. Should the scheduler refuse the task (shut down), the waits are signalled on
 * the pushing thread.
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

    /** Waits ended and not yet signalled, newest first; null when none. */
    private volatile PushBarrier head;

    /** {@code ended} is over: signals it on {@code on}, with the others that end before the task runs. */
    void hand(PushBarrier ended, Scheduler on) {
        PushBarrier seen;
        do {
            seen = head;
            ended.nextToSignal = seen;
        } while (!HEAD.compareAndSet(this, seen, ended));
        if (seen == null) {
            try {
                on.schedule(this::drain);
            } catch (RejectedExecutionException e) {
                drain();
            }
        }
    }

    /** Signals every wait handed over so far, the earliest ended first. */
    private void drain() {
        PushBarrier newestFirst = (PushBarrier) HEAD.getAndSet(this, (PushBarrier) null);
        PushBarrier oldestFirst = null;
        while (newestFirst != null) {
            PushBarrier next = newestFirst.nextToSignal;
            newestFirst.nextToSignal = oldestFirst;
            oldestFirst = newestFirst;
            newestFirst = next;
        }
        while (oldestFirst != null) {
            PushBarrier next = oldestFirst.nextToSignal;
            oldestFirst.nextToSignal = null;
            try {
                oldestFirst.signalHandedOver();
            } catch (RuntimeException e) {
                // a subscriber that threw: reported as a scheduler's task reports it, and the batch goes on
                Thread thread = Thread.currentThread();
                thread.getUncaughtExceptionHandler().uncaughtException(thread, e);
            }
            oldestFirst = next;
        }
    }
}
