package dev.kvflux.examples.webflux;

import dev.kvflux.operators.TransferException;
import java.util.Optional;

/**
 * What a transfer carries in its Reactor {@code Context}. {@link TransferService} writes both entries
 * with {@code contextWrite} when it subscribes to the pipeline, and the pipeline passes its subscriber's
 * Context to everything it runs for the transfer: the wait reads the {@link WaitReport} with
 * {@code Mono.deferContextual}, and the transfer id reaches every log line through the MDC
 * ({@link TransferIdMdc}).
 */
public final class TransferContext {
    /** The key of the transfer id, a {@code String}. */
    public static final String TRANSFER_ID = "kvflux.transfer.id";

    private TransferContext() {
    }

    /**
     * What the wait saw, filled in by {@link MeteredWait} (keyed by this class): the kind of a wait that
     * ended in a {@link TransferException}. The pipeline turns that exception into a {@code WriteFailed}
     * with its code and reason; the kind comes back to the request through this report. Written on the
     * wait's thread, read after the outcome is out.
     */
    public static final class WaitReport {
        private volatile TransferException.Kind failureKind;

        void failed(TransferException.Kind kind) {
            failureKind = kind;
        }

        /** How the wait failed; empty if it has not failed (or never ran). */
        public Optional<TransferException.Kind> failureKind() {
            return Optional.ofNullable(failureKind);
        }
    }
}
