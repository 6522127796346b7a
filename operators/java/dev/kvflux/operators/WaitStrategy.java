package dev.kvflux.operators;

import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import reactor.core.publisher.Mono;

/**
 * A way to wait for a request's statuses: kvflux's reactive {@link CompletionWait}, or one of the two
 * reference strategies it is measured against ({@code native}, {@code sliced-native}).
 */
public interface WaitStrategy {

    /** The name reports print: {@code reactive}, {@code native}, {@code sliced-native}. */
    String name();

    /**
     * A {@code Mono} that completes when every status succeeded and errors with a
     * {@link TransferException} otherwise. Nothing happens until it is subscribed. A status that breaks
     * the {@link TransferStatus} contract (null in the list, or a {@code code()} that throws or returns
     * null) ends the wait with a {@link TransferException} whose code is
     * {@link dev.kvflux.bindings.StatusCode#ERR_BAD_STATE} and whose cause is what was thrown.
     */
    Mono<Void> await(List<? extends TransferStatus> statuses);
}
