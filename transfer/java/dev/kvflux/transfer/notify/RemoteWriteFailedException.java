package dev.kvflux.transfer.notify;

import dev.kvflux.bindings.StatusCode;
import java.util.Objects;

/** Prefill told decode that a transfer's KV will not arrive ({@code write_failed}), with prefill's code and reason. */
public final class RemoteWriteFailedException extends RuntimeException {
    private final String transferId;
    private final StatusCode code;
    private final String reason;

    public RemoteWriteFailedException(String transferId, StatusCode code, String reason) {
        super("prefill reported write_failed for transfer " + transferId + " (" + code.qualifiedName() + "): "
                + reason, null, false, false);
        this.transferId = Objects.requireNonNull(transferId, "transferId");
        this.code = Objects.requireNonNull(code, "code");
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    public String transferId() {
        return transferId;
    }

    /** The status code prefill saw: IN_PROGRESS for a timed-out wait, else the failed status's code. */
    public StatusCode code() {
        return code;
    }

    /** Prefill's reason, as its wait reported it. */
    public String reason() {
        return reason;
    }
}
