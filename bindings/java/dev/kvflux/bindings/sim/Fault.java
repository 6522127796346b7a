package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.Objects;

/**
 * A deterministic fault for one batch of the simulated engine, chosen by the batch's ordinal: the
 * number of batches the engine accepted before it (0 for the first {@code batchWrite} or
 * {@code batchRead} on any of its sessions).
 *
 * <p>A {@linkplain #fail failing} batch never succeeds: the first query at or after {@code afterPost}
 * from its post turns its status into {@code code} with {@code message}, and the failure is sticky. A
 * {@linkplain #stall stalled} batch stays IN_PROGRESS for ever. A {@linkplain #slow slow} batch succeeds,
 * but {@code afterPost} later than its copy would have finished (the link is not held up: later batches
 * keep their own times).
 */
public record Fault(long batchOrdinal, Kind kind, Duration afterPost, StatusCode code, String message) {

    /** What happens to the chosen batch. */
    public enum Kind { FAIL, STALL, SLOW }

    public Fault {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(afterPost, "afterPost");
        Objects.requireNonNull(code, "code");
        Objects.requireNonNull(message, "message");
        if (batchOrdinal < 0) {
            throw new IllegalArgumentException("batch ordinal must be 0 or more, got " + batchOrdinal);
        }
        if (afterPost.isNegative()) {
            throw new IllegalArgumentException("a fault's time after the post must not be negative, got "
                    + DurationText.of(afterPost));
        }
        if (kind == Kind.FAIL && !code.isFailure()) {
            throw new IllegalArgumentException("a failing batch needs a failure code (ERR_...), got " + code);
        }
    }

    /** The batch with this ordinal fails with {@code code} and {@code message} at {@code afterPost}. */
    public static Fault fail(long batchOrdinal, Duration afterPost, StatusCode code, String message) {
        return new Fault(batchOrdinal, Kind.FAIL, afterPost, code, message);
    }

    /** The batch with this ordinal never completes. */
    public static Fault stall(long batchOrdinal) {
        return new Fault(batchOrdinal, Kind.STALL, Duration.ZERO, StatusCode.IN_PROGRESS, "");
    }

    /** The batch with this ordinal succeeds, {@code late} after its copy finished. */
    public static Fault slow(long batchOrdinal, Duration late) {
        return new Fault(batchOrdinal, Kind.SLOW, late, StatusCode.SUCCESS, "");
    }
}
