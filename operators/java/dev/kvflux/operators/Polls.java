package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeoutException;
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
 * {@link Schedulers#parallel()}, looked up at subscription so virtual time drives it), and gives up at a
 * bound: {@link #DEFAULT_EVENT_TIMEOUT} for an event, {@link #DEFAULT_STATUS_TIMEOUT} for a status, unless
 * given one. So no poll of this class waits for ever on an event or a status native code never completes.
 * Cancelling stops the polling.
 */
public final class Polls {
    /**
     * 1 ms, how often a layer's GPU event is queried until ready unless told otherwise, here and in the WRITE
     * pipeline. An event query is a cheap non-blocking call, and a layer is posted only once its event is
     * seen ready, so the period adds to every layer's post (the last one's to the request's outcome): a
     * period as short as this keeps that under a millisecond at one query per layer per millisecond.
     */
    public static final Duration DEFAULT_EVENT_POLL = Duration.ofMillis(1);
    /**
     * 30 s, how long a layer's event may stay not ready unless told otherwise, as the WRITE pipeline's event
     * timeout: past it the poll errors with {@link StatusCode#ERR_GPU_OP}.
     */
    public static final Duration DEFAULT_EVENT_TIMEOUT = Duration.ofSeconds(30);
    /**
     * 30 s, how long a status may stay in flight unless told otherwise, as a completion wait's default transfer
     * timeout: past it the poll errors as {@link TransferException#timedOut} does.
     */
    public static final Duration DEFAULT_STATUS_TIMEOUT = Duration.ofSeconds(30);

    private Polls() {
    }

    /**
     * Completes when {@code event} is ready, polling every {@link #DEFAULT_EVENT_POLL}; errors with the
     * event's own error, or with {@link StatusCode#ERR_GPU_OP} if it is not ready within
     * {@link #DEFAULT_EVENT_TIMEOUT}.
     */
    public static Mono<Void> layerReady(LayerEvent event) {
        return layerReady(event, DEFAULT_EVENT_POLL, DEFAULT_EVENT_TIMEOUT, null);
    }

    /**
     * Completes when {@code event} is ready, polling every {@code every} on {@code scheduler}, within
     * {@link #DEFAULT_EVENT_TIMEOUT}.
     */
    public static Mono<Void> layerReady(LayerEvent event, Duration every, Scheduler scheduler) {
        return layerReady(event, every, DEFAULT_EVENT_TIMEOUT, scheduler);
    }

    /**
     * Completes when {@code event} is ready, polling every {@code every} on {@code scheduler} ({@code null}:
     * {@link Schedulers#parallel()} at subscription); errors with the event's own error, or with a
     * {@link TransferException} of {@link StatusCode#ERR_GPU_OP} saying so, caused by a
     * {@link TimeoutException}, if it is not ready within {@code timeout}.
     */
    public static Mono<Void> layerReady(LayerEvent event, Duration every, Duration timeout, Scheduler scheduler) {
        Objects.requireNonNull(event, "event");
        checkTimeout(timeout, "event", DEFAULT_EVENT_TIMEOUT);
        String late = "layer event was not ready after " + DurationText.of(timeout);
        return poll(() -> event.query() == EventState.READY ? Optional.of(Boolean.TRUE) : Optional.empty(),
                every, timeout, scheduler,
                () -> new TransferException(StatusCode.ERR_GPU_OP, late, new TimeoutException(late))).then();
    }

    /**
     * Emits the status's terminal code (SUCCESS or a failure) once it has one, polling every 10 ms; errors as
     * {@link TransferException#timedOut} does if it has none within {@link #DEFAULT_STATUS_TIMEOUT}.
     */
    public static Mono<StatusCode> terminal(TransferStatus status) {
        return terminal(status, WaitSpec.DEFAULT_SLICE, DEFAULT_STATUS_TIMEOUT, null);
    }

    /**
     * Emits the status's terminal code once it has one, polling every {@code every} on {@code scheduler}, within
     * {@link #DEFAULT_STATUS_TIMEOUT}.
     */
    public static Mono<StatusCode> terminal(TransferStatus status, Duration every, Scheduler scheduler) {
        return terminal(status, every, DEFAULT_STATUS_TIMEOUT, scheduler);
    }

    /**
     * Emits the status's terminal code once it has one, polling every {@code every} on {@code scheduler}; errors as
     * {@link TransferException#timedOut} does (kind {@code TIMED_OUT}, code {@code IN_PROGRESS}) if it has none
     * within {@code timeout}.
     */
    public static Mono<StatusCode> terminal(TransferStatus status, Duration every, Duration timeout,
            Scheduler scheduler) {
        Objects.requireNonNull(status, "status");
        checkTimeout(timeout, "status", DEFAULT_STATUS_TIMEOUT);
        return poll(() -> {
            StatusCode code = status.code();
            return code.isTerminal() ? Optional.of(code) : Optional.empty();
        }, every, timeout, scheduler, () -> TransferException.timedOut(timeout));
    }

    private static void checkTimeout(Duration timeout, String what, Duration byDefault) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isZero() || timeout.isNegative()) {
            throw new IllegalArgumentException(what + " poll timeout must be positive, got " + DurationText.of(timeout)
                    + "; the default is " + DurationText.of(byDefault));
        }
    }

    /**
     * Emits the first value {@code check} yields: at subscription, then every {@code every}; errors with what
     * {@code late} makes if none came within {@code timeout}.
     */
    static <T> Mono<T> poll(Supplier<Optional<T>> check, Duration every, Duration timeout, Scheduler scheduler,
            Supplier<? extends RuntimeException> late) {
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
                    .next()
                    .timeout(timeout, Mono.error(late), on);
        });
    }
}
