package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Publishers over things that native code completes only when asked: a layer's GPU event becomes a
 * {@code Mono<Void>}, a transfer status a {@code Mono<StatusCode>} of its terminal code.
 *
 * <p>Each checks once at subscription and then every {@code every} on the scheduler (default
 * {@link Schedulers#parallel()}, looked up at subscription so virtual time drives it). None has a timeout
 * of its own: compose one with {@code timeout(...)}. Cancelling stops the polling.
 */
public final class Polls {
    /**
     * 1 ms, how often a layer's GPU event is queried until ready unless told otherwise, here and in the WRITE
     * pipeline. An event query is a cheap non-blocking call, and a layer is posted only once its event is
     * seen ready, so the period adds to every layer's post (the last one's to the request's outcome): a
     * period as short as this keeps that under a millisecond at one query per layer per millisecond.
     */
    public static final Duration DEFAULT_EVENT_POLL = Duration.ofMillis(1);

    private Polls() {
    }

    /**
     * Completes when {@code event} is ready, polling every {@link #DEFAULT_EVENT_POLL}; errors with the
     * event's own error.
     */
    public static Mono<Void> layerReady(LayerEvent event) {
        return layerReady(event, DEFAULT_EVENT_POLL, null);
    }

    /** Completes when {@code event} is ready, polling every {@code every} on {@code scheduler}. */
    public static Mono<Void> layerReady(LayerEvent event, Duration every, Scheduler scheduler) {
        Objects.requireNonNull(event, "event");
        return poll(() -> event.query() == EventState.READY ? Optional.of(Boolean.TRUE) : Optional.empty(),
                every, scheduler).then();
    }

    /** Emits the status's terminal code (SUCCESS or a failure) once it has one, polling every 10 ms. */
    public static Mono<StatusCode> terminal(TransferStatus status) {
        return terminal(status, WaitSpec.DEFAULT_SLICE, null);
    }

    /** Emits the status's terminal code once it has one, polling every {@code every} on {@code scheduler}. */
    public static Mono<StatusCode> terminal(TransferStatus status, Duration every, Scheduler scheduler) {
        Objects.requireNonNull(status, "status");
        return poll(() -> {
            StatusCode code = status.code();
            return code.isTerminal() ? Optional.of(code) : Optional.empty();
        }, every, scheduler);
    }

    /** Emits the first value {@code check} yields: at subscription, then every {@code every}. */
    static <T> Mono<T> poll(Supplier<Optional<T>> check, Duration every, Scheduler scheduler) {
        Objects.requireNonNull(every, "every");
        if (every.isZero() || every.isNegative()) {
            throw new IllegalArgumentException("poll period must be positive, got " + DurationText.of(every)
                    + "; the operators poll an event every " + DurationText.of(DEFAULT_EVENT_POLL)
                    + " and a status every " + DurationText.of(WaitSpec.DEFAULT_SLICE) + " by default");
        }
        return Mono.defer(() -> {
            Optional<T> now = check.get();
            if (now.isPresent()) {
                return Mono.just(now.get());
            }
            Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
            return Flux.interval(every, every, on)
                    .concatMap(tick -> Mono.justOrEmpty(check.get()))
                    .next();
        });
    }
}
