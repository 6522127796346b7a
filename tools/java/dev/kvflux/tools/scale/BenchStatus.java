package dev.kvflux.tools.scale;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A status for the scale bench: {@link #code()} is one volatile read (the cheap in-memory check a fast
 * backend would be), and it counts its queries. The bench's notifier thread {@link #finish finishes} it at
 * its time; with push, that also emits on {@link #pushed()}. Its queries are counted in a plain field: a
 * status is queried by one thread at a time in every wait the bench runs.
 */
final class BenchStatus implements PushedStatus {
    private final Sinks.One<StatusCode> sink;
    private volatile boolean done;
    private volatile java.util.function.Consumer<StatusCode> listener;
    /** When it was finished ({@link System#nanoTime()}, as its notifier read it), for the detection lag. */
    private long finishedAt = UNKNOWN_TIME;
    int queries;

    BenchStatus(boolean push) {
        this.sink = push ? Sinks.unsafe().one() : null;
    }

    @Override
    public StatusCode code() {
        queries++;
        return done ? StatusCode.SUCCESS : StatusCode.IN_PROGRESS;
    }

    @Override
    public String message() {
        return "";
    }

    /** When the notifier finished it, once a query or push has seen it done (published by {@code done}). */
    @Override
    public long completedAtNanos() {
        return done ? finishedAt : UNKNOWN_TIME;
    }

    /** When it was finished ({@link System#nanoTime()}); read after the round, once every notifier has ended. */
    long finishedAt() {
        return finishedAt;
    }

    /** {@inheritDoc} With push, as {@link #pushed()} without the sink: what a backend's listener path costs. */
    @Override
    public boolean onPushed(java.util.function.Consumer<StatusCode> l) {
        if (sink == null) {
            return false;
        }
        listener = l;
        if (done) {
            l.accept(StatusCode.SUCCESS);
        }
        return true;
    }

    /** {@inheritDoc} SUCCESS once finished, with push; null without, so that polling waits query it as before. */
    @Override
    public StatusCode settledCode() {
        return sink != null && done ? StatusCode.SUCCESS : null;
    }

    @Override
    public Mono<StatusCode> pushed() {
        return sink != null ? sink.asMono() : Mono.never();
    }

    /**
     * Marks the status done, finished at {@code now} ({@link System#nanoTime()}), and, with push, pushes SUCCESS on
     * the calling (notifier) thread.
     */
    void finish(long now) {
        finishedAt = now;
        done = true;
        java.util.function.Consumer<StatusCode> l = listener;
        if (l != null) {
            l.accept(StatusCode.SUCCESS);
        } else if (sink != null) {
            sink.tryEmitValue(StatusCode.SUCCESS);
        }
    }
}
