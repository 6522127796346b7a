package dev.kvflux.bindings;

/**
 * The state of one posted transfer or batch, as MoRI IO's {@code TransferStatus}.
 *
 * <p>{@link #code()} is non-blocking, and it may drive the transfer's progress: on MoRI's xGMI backend a
 * status becomes terminal only when something queries it after its copy finished. Implementations are
 * safe to query from any thread.
 */
public interface TransferStatus {

    /** The current code; queries the backend, which may complete the status. Never blocks. */
    StatusCode code();

    /** The message set with the last terminal code; empty while in flight. */
    String message();
}
