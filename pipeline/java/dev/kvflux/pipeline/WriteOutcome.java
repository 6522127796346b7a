package dev.kvflux.pipeline;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.TransferException.Kind;
import java.util.Objects;

/**
 * The one signal a request's WRITE ends with: decode may read its KV ({@link WriteDone}), or it never
 * will ({@link WriteFailed}, with the status code and reason that prefill saw). Sealed, so a {@code switch}
 * over the two needs no default:
 *
 * <pre>{@code
 * switch (outcome) {
 *     case WriteDone done -> notifyDone(done.transferId());
 *     case WriteFailed failed -> notifyFailed(failed.transferId(), failed.code(), failed.reason());
 * }
 * }</pre>
 */
public sealed interface WriteOutcome {

    String transferId();

    /** Every status of the request succeeded: decode may start. */
    record WriteDone(String transferId) implements WriteOutcome {
        public WriteDone {
            Objects.requireNonNull(transferId, "transferId");
        }
    }

    /**
     * The request's KV will not arrive. {@code kind} says how the wait ended: a status or the posting failed
     * ({@link Kind#FAILED}), statuses were still in flight at the transfer timeout ({@link Kind#TIMED_OUT},
     * code IN_PROGRESS), or nothing left flight for the stall time ({@link Kind#STALLED}, code IN_PROGRESS).
     */
    record WriteFailed(String transferId, StatusCode code, String reason, Kind kind) implements WriteOutcome {
        public WriteFailed {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(reason, "reason");
            Objects.requireNonNull(kind, "kind");
        }

        /** A failure of kind {@link Kind#FAILED}. */
        public WriteFailed(String transferId, StatusCode code, String reason) {
            this(transferId, code, reason, Kind.FAILED);
        }
    }
}
