package dev.kvflux.operators;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;

/**
 * A {@link PushBarrier}'s subscription to one status's pushes, which also holds the code the status settled with, so
 * that a push touches only its slot and the barrier's counter.
 */
final class PushSlot implements CoreSubscriber<StatusCode>, java.util.function.Consumer<StatusCode> {
    private static final VarHandle CODE;

    static {
        try {
            CODE = MethodHandles.lookup().findVarHandle(PushSlot.class, "code", StatusCode.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final PushBarrier barrier;
    final int index;
    /** Whether the slot listens through {@link PushedStatus#onPushed} (set before it is given as the listener). */
    boolean listens;
    volatile StatusCode code;
    private volatile Subscription subscription;
    private volatile boolean cancelled;

    PushSlot(PushBarrier barrier, int index) {
        this.barrier = barrier;
        this.index = index;
    }

    @Override
    public void onSubscribe(Subscription s) {
        subscription = s;
        if (cancelled) {
            s.cancel();
        } else {
            s.request(Long.MAX_VALUE);
        }
    }

    @Override
    public void onNext(StatusCode code) {
        if (code == null) {
            barrier.finish(TransferException.badState("status " + index + " of " + barrier.size()
                    + ": pushed() emitted null", null), true);
        } else if (code.isTerminal() && settle(code)) {
            barrier.counted(index, code, true);
        }
    }

    /** A push through {@link PushedStatus#onPushed}: as {@link #onNext}. */
    @Override
    public void accept(StatusCode code) {
        onNext(code);
    }

    @Override
    public void onError(Throwable e) {
        barrier.finish(TransferException.badState("status " + index + " of " + barrier.size()
                + ": pushed() errored with " + e, e), true);
    }

    @Override
    public void onComplete() {
        // A status never posted completes empty; the timeout's last query decides about it.
    }

    /** Records the terminal code; false if the status had already settled (a push racing the last query). */
    boolean settle(StatusCode terminal) {
        return CODE.compareAndSet(this, (StatusCode) null, terminal);
    }

    void cancel() {
        cancelled = true;
        Subscription s = subscription;
        if (s != null) {
            s.cancel();
        }
    }
}
