package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.Objects;

/**
 * A completion wait that did not end in success: a status failed, or statuses were still in flight at
 * the transfer timeout ({@link StatusCode#IN_PROGRESS}). The message keeps the seed's form, so existing
 * log searches still find it: {@code MoRIIO batch wait failed (StatusCode.X): reason}.
 */
public final class TransferException extends RuntimeException {
    private static final String STALLED = "RDMA transfer stalled: no status completed for ";

    private final StatusCode code;
    private final String reason;

    public TransferException(StatusCode code, String reason) {
        this(code, reason, null);
    }

    /** A wait error caused by {@code cause} (a status that broke the library contract); cause may be null. */
    public TransferException(StatusCode code, String reason, Throwable cause) {
        super("MoRIIO batch wait failed (" + code.qualifiedName() + "): " + reason, cause, false, false);
        this.code = Objects.requireNonNull(code, "code");
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /**
     * The error for a status that broke the {@link dev.kvflux.bindings.TransferStatus} contract: it is null,
     * or its {@code code()} threw ({@code cause}) or returned null. Code {@link StatusCode#ERR_BAD_STATE}.
     */
    public static TransferException badState(String reason, Throwable cause) {
        return new TransferException(StatusCode.ERR_BAD_STATE, reason, cause);
    }

    /** The error for statuses still in flight at {@code transferTimeout}. */
    public static TransferException timedOut(Duration transferTimeout) {
        return new TransferException(StatusCode.IN_PROGRESS,
                "RDMA transfer timed out after " + seconds(transferTimeout));
    }

    /** The error for a transfer in which no status left flight for {@code stallAfter}. */
    public static TransferException stalled(Duration stallAfter, int inFlight, int total) {
        return new TransferException(StatusCode.IN_PROGRESS, STALLED + seconds(stallAfter) + ", " + inFlight
                + " of " + total + " statuses still in flight");
    }

    /** The error for a failed status, carrying its code and message. */
    public static TransferException failed(StatusCode code, String statusMessage) {
        return new TransferException(code, statusMessage == null ? "" : statusMessage);
    }

    /** The failing code, or IN_PROGRESS for a timeout. */
    public StatusCode code() {
        return code;
    }

    /** The reason alone, without the {@code MoRIIO batch wait failed (...)} prefix. */
    public String reason() {
        return reason;
    }

    /** Whether the wait ran out of time (its timeout, or a stall) rather than seeing a failed status. */
    public boolean isTimeout() {
        return code == StatusCode.IN_PROGRESS;
    }

    /** Whether the wait ended early because no status completed for its stall time. */
    public boolean isStall() {
        return code == StatusCode.IN_PROGRESS && reason.startsWith(STALLED);
    }

    /** {@code 30s}, {@code 3s}, {@code 0.5s}: whole seconds without a fraction, as the seed prints them. */
    static String seconds(Duration d) {
        if (d.toNanosPart() == 0) {
            return d.toSeconds() + "s";
        }
        return java.math.BigDecimal.valueOf(d.toNanos(), 9).stripTrailingZeros().toPlainString() + "s";
    }
}
