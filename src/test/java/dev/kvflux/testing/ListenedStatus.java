package dev.kvflux.testing;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * A status that pushes through a listener only ({@link PushedStatus#onPushed}), when the test says: its
 * {@link #pushed()} must not be subscribed. Counts its queries; may know when its copies ended, on a test's clock.
 */
public final class ListenedStatus extends CountedStatus {
    private volatile Consumer<StatusCode> listener;
    private volatile boolean endedUnpushed;
    private volatile boolean saysSettled;
    /** How many listeners a wait gave it ({@link #onPushed}). */
    public final java.util.concurrent.atomic.AtomicInteger listenersGiven = new java.util.concurrent.atomic.AtomicInteger();

    /** A status on {@link System#nanoTime()} that cannot tell when its copies ended. */
    public ListenedStatus() {
        this(null);
    }

    private ListenedStatus(Scheduler clock) {
        super(clock);
    }

    /** A status on {@code clock} whose copies ended at {@code endMillis} (-1: it cannot tell). */
    public static ListenedStatus endedAt(Scheduler clock, long endMillis) {
        ListenedStatus status = new ListenedStatus(clock);
        status.endNanos = endMillis < 0 ? UNKNOWN_TIME : TimeUnit.MILLISECONDS.toNanos(endMillis);
        return status;
    }

    /**
     * Makes it say its code once settled ({@link PushedStatus#settledCode}), as the engines' statuses do; by default
     * it says nothing, as a backend that does not keep the code. Returns this status.
     */
    public ListenedStatus sayingWhenSettled() {
        saysSettled = true;
        return this;
    }

    /** Pushes SUCCESS to the listener. */
    public void push() {
        push(StatusCode.SUCCESS);
    }

    /** Pushes {@code terminal} to the listener. */
    public void push(StatusCode terminal) {
        code = terminal;
        listener.accept(terminal);
    }

    /**
     * Its copies have ended but the backend has not pushed yet: a query finds SUCCESS, a listener given now is not
     * told, and {@link #push()} still tells it later.
     */
    public void endWithoutPush() {
        endedUnpushed = true;
    }

    @Override
    public StatusCode code() {
        StatusCode now = super.code();
        return now == StatusCode.IN_PROGRESS && endedUnpushed ? StatusCode.SUCCESS : now;
    }

    @Override
    public StatusCode settledCode() {
        StatusCode now = code;
        return saysSettled && now.isTerminal() ? now : null;
    }

    @Override
    public boolean onPushed(Consumer<StatusCode> l) {
        listenersGiven.incrementAndGet();
        listener = l;
        if (code.isTerminal()) {
            l.accept(code); // settled before the listener came: told at once, as the contract says
        }
        return true;
    }

    @Override
    public Mono<StatusCode> pushed() {
        return Mono.error(new AssertionError("the wait subscribed to pushed() although a listener was taken"));
    }
}
