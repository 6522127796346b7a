package dev.kvflux.pipeline;

import dev.kvflux.bindings.StatusCode;
import java.util.Objects;

/**
 * The one signal a request's WRITE ends with: decode may read its KV ({@link WriteDone}), or it never
 * will ({@link WriteFailed}, with the status code and reason that prefill saw).
 */
public sealed interface WriteOutcome {

    String transferId();

    /** Every status of the request succeeded: decode may start. */
    record WriteDone(String transferId) implements WriteOutcome {
        public WriteDone {
            Objects.requireNonNull(transferId, "transferId");
        }
    }

    /** The request's KV will not arrive: a status failed, or the wait timed out (IN_PROGRESS). */
    record WriteFailed(String transferId, StatusCode code, String reason) implements WriteOutcome {
        public WriteFailed {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(reason, "reason");
        }
    }
}
