package dev.kvflux.testing;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * A status that pushes through a listener only ({@link PushedStatus#onPushed}), when the test says: its
 * {@link #pushed()} must not be subscribed. Counts its queries; may know when its copies ended, on a test's clock.
 */
public final class ListenedStatus implements PushedStatus {
    /** The code; a test may set it before a wait subscribes, as a status settled earlier. */
    public volatile StatusCode code = StatusCode.IN_PROGRESS;
    /** When its copies ended, on {@link #clockNanos()}'s clock; {@link #UNKNOWN_TIME} until a test says. */
    public volatile long endNanos = UNKNOWN_TIME;
    public final AtomicInteger queries = new AtomicInteger();
    private final Scheduler clock;
    private volatile Consumer<StatusCode> listener;

    /** A status on {@link System#nanoTime()} that cannot tell when its copies ended. */
    public ListenedStatus() {
        this(null);
    }

    private ListenedStatus(Scheduler clock) {
        this.clock = clock;
    }

    /** A status on {@code clock} whose copies ended at {@code endMillis} (-1: it cannot tell). */
    public static ListenedStatus endedAt(Scheduler clock, long endMillis) {
        ListenedStatus status = new ListenedStatus(clock);
        status.endNanos = endMillis < 0 ? UNKNOWN_TIME : TimeUnit.MILLISECONDS.toNanos(endMillis);
        return status;
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

    @Override
    public boolean onPushed(Consumer<StatusCode> l) {
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

    @Override
    public StatusCode code() {
        queries.incrementAndGet();
        return code;
    }

    @Override
    public String message() {
        return code.isFailure() ? "copy failed" : "";
    }

    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? endNanos : UNKNOWN_TIME;
    }

    @Override
    public long clockNanos() {
        return clock == null ? System.nanoTime() : clock.now(TimeUnit.NANOSECONDS);
    }
}
