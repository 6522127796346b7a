package dev.kvflux.transfer.notify;

import java.time.Duration;
import java.util.Objects;

/** Neither {@code write_done} nor {@code write_failed} reached decode for a transfer before its receive deadline. */
public final class ReceiveDeadlineException extends RuntimeException {
    private final String transferId;
    private final Duration deadline;

    public ReceiveDeadlineException(String transferId, Duration deadline) {
        super("no write_done or write_failed for transfer " + transferId + " within " + deadline.toMillis()
                + " ms; prefill may have stopped or its notice was lost. Raise the receive deadline if prefill's"
                + " transfer timeout is longer", null, false, false);
        this.transferId = Objects.requireNonNull(transferId, "transferId");
        this.deadline = deadline;
    }

    public String transferId() {
        return transferId;
    }

    public Duration deadline() {
        return deadline;
    }
}
