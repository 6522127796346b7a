package dev.kvflux.transfer;

import java.util.Objects;

/**
 * A side refused to open a transfer; nothing was allocated for it. {@link #reason()} says why, the message says
 * what to do. Stackless: a refusal is an answer, not a bug.
 */
public final class TransferRefusedException extends RuntimeException {

    /** Why a transfer was refused. */
    public enum Reason {
        /** The transfer id is running, was aborted, or has already finished here: every request needs its own. */
        DUPLICATE,
        /** The id's block list came from a previous incarnation of decode (prefill only). */
        STALE_PEER,
        /** Fewer KV blocks are free than the transfer needs (or it needs more than the side has). */
        OUT_OF_BLOCKS,
        /** The transfer needs more blocks than one transfer may hold on this side ({@code maxBlocksPerTransfer}). */
        TOO_LARGE,
        /** The side is shutting down and takes no new transfers. */
        SHUTTING_DOWN
    }

    private final Reason reason;

    public TransferRefusedException(Reason reason, String message) {
        super(Objects.requireNonNull(message, "message"), null, false, false);
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /** Why the transfer was refused. */
    public Reason reason() {
        return reason;
    }
}
