package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.Objects;

/**
 * A completion wait that did not end in success: a status failed, statuses were still in flight at
 * the transfer timeout, or no status left flight for the wait's stall time. {@link #kind()} says which;
 * {@link #code()} carries the status code ({@link StatusCode#IN_PROGRESS} for a timeout or a stall). The
 * message keeps one form, so existing log searches still find it:
 * {@code MoRIIO batch wait failed (StatusCode.X): reason}; the timeout and the stall time in it print in
 * seconds ({@code 30s}, {@code 0.2s}), as vLLM's MoRIIO connector prints its timeout, where the library's
 * other messages print durations as {@link dev.kvflux.bindings.DurationText} does.
 */
public final class TransferException extends RuntimeException {
    private static final String STALLED = "RDMA transfer stalled: no status completed for ";

    /** How a wait ended without success. */
    public enum Kind {
        /**
         * A status failed, the engine reported a failure, or a status broke the
         * {@link dev.kvflux.bindings.TransferStatus} contract ({@link StatusCode#ERR_BAD_STATE}).
         */
        FAILED,
        /** Statuses were still in flight when the transfer timeout passed. */
        TIMED_OUT,
        /** No status left flight for the wait's stall time while some were still in flight. */
        STALLED
    }

    private final Kind kind;
    private final StatusCode code;
    private final String reason;

    /** An error of kind {@link Kind#TIMED_OUT} if {@code code} is IN_PROGRESS, else {@link Kind#FAILED}. */
    public TransferException(StatusCode code, String reason) {
        this(code, reason, null);
    }

    /**
     * A wait error caused by {@code cause} (a status that broke the library contract); cause may be null.
     * Its kind is {@link Kind#TIMED_OUT} if {@code code} is IN_PROGRESS, else {@link Kind#FAILED}.
     */
    public TransferException(StatusCode code, String reason, Throwable cause) {
        this(Objects.requireNonNull(code, "code") == StatusCode.IN_PROGRESS ? Kind.TIMED_OUT : Kind.FAILED,
                code, reason, cause);
    }

    private TransferException(Kind kind, StatusCode code, String reason, Throwable cause) {
        super("MoRIIO batch wait failed (" + code.qualifiedName() + "): " + reason, cause, false, false);
        this.kind = kind;
        this.code = code;
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /**
     * The error for a status that broke the {@link dev.kvflux.bindings.TransferStatus} contract: it is null,
     * or its {@code code()} threw ({@code cause}) or returned null. Code {@link StatusCode#ERR_BAD_STATE}, kind {@link Kind#FAILED}.
     */
    public static TransferException badState(String reason, Throwable cause) {
        return new TransferException(Kind.FAILED, StatusCode.ERR_BAD_STATE, reason, cause);
    }

    /** The error for statuses still in flight at {@code transferTimeout}; kind {@link Kind#TIMED_OUT}. */
    public static TransferException timedOut(Duration transferTimeout) {
        return new TransferException(Kind.TIMED_OUT, StatusCode.IN_PROGRESS,
                "RDMA transfer timed out after " + seconds(transferTimeout), null);
    }

    /** The error for a transfer in which no status left flight for {@code stallAfter}; kind {@link Kind#STALLED}. */
    public static TransferException stalled(Duration stallAfter, int inFlight, int total) {
        return new TransferException(Kind.STALLED, StatusCode.IN_PROGRESS, STALLED + seconds(stallAfter) + ", "
                + inFlight + " of " + total + " statuses still in flight", null);
    }

    /** The error for a failed status, carrying its code and message; kind {@link Kind#FAILED}. */
    public static TransferException failed(StatusCode code, String statusMessage) {
        return new TransferException(Kind.FAILED, Objects.requireNonNull(code, "code"),
                statusMessage == null ? "" : statusMessage, null);
    }

    /** How the wait ended: a failed status, the transfer timeout, or a stall. */
    public Kind kind() {
        return kind;
    }

    /** The failing code, or IN_PROGRESS for a timeout or a stall. */
    public StatusCode code() {
        return code;
    }

    /** The reason alone, without the {@code MoRIIO batch wait failed (...)} prefix. */
    public String reason() {
        return reason;
    }

    /** Whether the wait ran out of time (its timeout, or a stall) rather than seeing a failed status. */
    public boolean isTimeout() {
        return kind == Kind.TIMED_OUT || kind == Kind.STALLED;
    }

    /**
     * Whether the wait ended early because no status completed for its stall time: the same as
     * {@code kind() == Kind.STALLED}.
     */
    public boolean isStall() {
        return kind == Kind.STALLED;
    }

    /** {@code 30s}, {@code 3s}, {@code 0.5s}: whole seconds without a fraction, as vLLM's messages print them. */
    static String seconds(Duration d) {
        if (d.toNanosPart() == 0) {
            return d.toSeconds() + "s";
        }
        return java.math.BigDecimal.valueOf(d.toNanos(), 9).stripTrailingZeros().toPlainString() + "s";
    }
}
