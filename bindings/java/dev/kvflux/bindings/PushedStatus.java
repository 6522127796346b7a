package dev.kvflux.bindings;

import java.util.function.Consumer;
import reactor.core.publisher.Mono;

/**
 * A transfer status whose backend announces completion itself (a GPU host function, a completion-queue
 * thread), so a waiter needs no poll loop.
 */
public interface PushedStatus extends TransferStatus {

    /**
     * Emits the terminal code (SUCCESS or a failure) once the backend pushes it, at once if it is already
     * terminal; never errors, never polls. Emits on the backend's notification thread, or on the
     * subscriber's if already terminal. Never completes empty unless the status is never posted.
     */
    Mono<StatusCode> pushed();

    /**
     * The same push without a Reactor subscription: {@code listener} is given the terminal code once the backend
     * pushes it, on the backend's notification thread, or at once on the caller's if it is already terminal; it may
     * be given it twice when the push races the registration, so it must be idempotent, quick, and never throw. Every
     * listener given is told: several waits may wait for one status at once.
     * Returns false where the status offers no listener (the default): then use {@link #pushed()}. Waits at scale
     * use it to spare a subscription's work on every push ({@code PushWait} does).
     */
    default boolean onPushed(Consumer<StatusCode> listener) {
        return false;
    }

    /**
     * The terminal code this status has settled with, where it is known here without a query (no native call, no
     * progress driven), or null while it may still be in flight and where the backend does not keep it (the default).
     * Once non-null it never changes, and {@link #completedAtNanos()} is as readable as after a push. A wait that begins
     * after the request's copies ended counts such statuses at once: it gives them no listener, which a settled status
     * would only call back at once. Never blocks.
     */
    default StatusCode settledCode() {
        return null;
    }

    /**
     * When this status's push passed each stage on its way to the listeners, once it settled by a push;
     * {@link PushTimeline#NONE} before, for a status settled otherwise, and where the backend records no stage (the
     * default). Cheap: the times are recorded on the way anyway, and only this call allocates.
     */
    default PushTimeline timeline() {
        return PushTimeline.NONE;
    }
}
