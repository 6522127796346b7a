package dev.kvflux.transfer;

import dev.kvflux.bindings.StatusCode;
import java.util.Objects;

/**
 * Decode will not get a transfer's KV: {@link #kind()} says how the wait for it ended, {@link #code()} the status
 * code prefill reported (for {@link Kind#WRITE_FAILED}; {@code ERR_BAD_STATE} for {@link Kind#CORRUPT}; null
 * otherwise), and the message the reason, in words a user can act on. Stackless.
 */
public final class ReceiveFailedException extends RuntimeException {

    /** How decode's wait for a transfer's KV ended without it. */
    public enum Kind {
        /** Prefill said {@code write_failed}, with its status code and reason. */
        WRITE_FAILED,
        /** Prefill said {@code write_done}, but its content check does not match decode's blocks. */
        CORRUPT,
        /** No notice came within decode's receive deadline. */
        DEADLINE,
        /** Decode could not deliver its block list, so prefill could not write. */
        UNDELIVERABLE,
        /** The prefill the KV was to come from restarted: its previous life's work is gone. */
        PREFILL_RESTARTED,
        /** Decode is shutting down. */
        SHUTTING_DOWN,
        /** READ mode: a read of the KV from prefill failed or timed out (after every read in flight drained). */
        READ_FAILED
    }

    private final String transferId;
    private final Kind kind;
    private final StatusCode code;

    public ReceiveFailedException(String transferId, Kind kind, StatusCode code, String message) {
        super(Objects.requireNonNull(message, "message"), null, false, false);
        this.transferId = Objects.requireNonNull(transferId, "transferId");
        this.kind = Objects.requireNonNull(kind, "kind");
        this.code = code;
    }

    /** The transfer whose KV will not come. */
    public String transferId() {
        return transferId;
    }

    /** How the wait ended. */
    public Kind kind() {
        return kind;
    }

    /** Prefill's status code for {@link Kind#WRITE_FAILED}, {@code ERR_BAD_STATE} for {@link Kind#CORRUPT}, else null. */
    public StatusCode code() {
        return code;
    }
}
