package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import java.util.Objects;

/**
 * Queries statuses under the waits' library contract: a null status, or a {@code code()} that throws or
 * returns null, becomes a {@link TransferException} with {@link StatusCode#ERR_BAD_STATE} and the cause.
 * Messages are built only when something is wrong, never on the hot path.
 */
final class StatusChecks {
    private StatusChecks() {
    }

    /** The statuses as an array, nulls kept (the wait reports them); the list itself must not be null. */
    static TransferStatus[] snapshot(List<? extends TransferStatus> statuses) {
        Objects.requireNonNull(statuses, "statuses");
        return statuses.toArray(new TransferStatus[0]);
    }

    /** The error for the first null status, or null when there is none. */
    static TransferException nullStatus(TransferStatus[] statuses) {
        for (int i = 0; i < statuses.length; i++) {
            if (statuses[i] == null) {
                return TransferException.badState("status " + i + " of " + statuses.length + " is null", null);
            }
        }
        return null;
    }

    /**
     * The code of {@code statuses[index]}.
     *
     * @throws TransferException with ERR_BAD_STATE if {@code code()} threw or returned null
     */
    static StatusCode code(TransferStatus[] statuses, int index) {
        StatusCode code;
        try {
            code = statuses[index].code();
        } catch (RuntimeException e) {
            throw TransferException.badState("status " + index + " of " + statuses.length + ": code() threw " + e, e);
        }
        if (code == null) {
            throw TransferException.badState("status " + index + " of " + statuses.length + ": code() returned null",
                    null);
        }
        return code;
    }

    /** The status's message; a null one is empty, and one that throws says so instead. */
    static String message(TransferStatus status) {
        try {
            String message = status.message();
            return message == null ? "" : message;
        } catch (RuntimeException e) {
            return "(message() threw " + e + ")";
        }
    }

    /** The error for a failed status: its code and its message. */
    static TransferException failed(TransferStatus status, StatusCode code) {
        return TransferException.failed(code, message(status));
    }

    /**
     * The error a blocking engine call that threw should end the wait with: ERR_BAD_STATE if a status
     * breaks the contract now (the call most likely threw from its {@code code()}), else {@code thrown}.
     */
    static RuntimeException afterEngineThrew(TransferStatus[] statuses, RuntimeException thrown) {
        for (int i = 0; i < statuses.length; i++) {
            try {
                code(statuses, i);
            } catch (TransferException broken) {
                return broken;
            }
        }
        return thrown;
    }
}
