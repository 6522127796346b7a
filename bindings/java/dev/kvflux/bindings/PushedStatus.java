package dev.kvflux.bindings;

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
}
