package dev.kvflux.operators;

/** How one wait ended, as a {@link WaitRecorder} hears it. */
public enum WaitOutcome {
    /** Every status succeeded. */
    DONE,
    /** A status failed, the engine reported a failure, or a status broke the library contract. */
    FAILED,
    /** Statuses were still in flight at the transfer timeout. */
    TIMED_OUT,
    /** No status left flight for the wait's stall time. */
    STALLED,
    /** The subscriber cancelled before the wait ended. */
    CANCELLED;

    /** The outcome a wait that ended with {@code error} had: by its {@link TransferException#kind()}, else FAILED. */
    static WaitOutcome of(Throwable error) {
        if (error == null) {
            return DONE;
        }
        if (error instanceof TransferException t) {
            return switch (t.kind()) {
                case FAILED -> FAILED;
                case TIMED_OUT -> TIMED_OUT;
                case STALLED -> STALLED;
            };
        }
        return FAILED;
    }

    /** The lower-case name meters tag it with: {@code done}, {@code failed}, {@code timed_out}, ... */
    public String tagValue() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
