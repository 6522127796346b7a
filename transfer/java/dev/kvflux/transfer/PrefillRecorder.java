package dev.kvflux.transfer;

import dev.kvflux.pipeline.WriteOutcome;
import java.time.Duration;

/**
 * Where a {@link PrefillSide} reports what became of its transfers; {@link #NOOP} by default. Called on whichever
 * thread the event happened on (a notify event loop, the WRITE pipeline's scheduler, the caller's): an
 * implementation must be thread-safe, quick, and must not block.
 */
public interface PrefillRecorder {
    /** Records nothing. */
    PrefillRecorder NOOP = new PrefillRecorder() { };

    /** Things that happen to prefill's transfers, one report each. */
    enum Event {
        /** A transfer was refused at {@link PrefillSide#open}: its id was running, aborted or finished. */
        REFUSED_DUPLICATE,
        /** A transfer was refused at {@link PrefillSide#open}: fewer blocks were free than it needs. */
        REFUSED_OUT_OF_BLOCKS,
        /** A transfer was stopped by {@code abort} (from decode) or by {@link PrefillTransfer#abort}. */
        ABORTED,
        /** An {@code abort} came for a transfer prefill has not seen or has finished; its id is fenced. */
        ABORT_FOR_UNKNOWN,
        /** A message from (or about blocks of) another incarnation of decode than the current was dropped. */
        STALE_INCARNATION,
        /** A transfer failed at once because the decode it targeted restarted. */
        FAILED_ON_DECODE_RESTART,
        /** A write was not started because it came after the transfer's deadline (decode has given up on it). */
        PAST_DEADLINE,
        /** Copies were still in flight when the drain before {@code release} timed out; the blocks were freed anyway. */
        STALLED_AT_RELEASE,
        /** A {@code release} was sent to decode once the transfer's copies were terminal. */
        RELEASE_SENT,
        /** A write failed and decode was not told (failure notices off: vLLM's behaviour before its fix). */
        FAILURE_NOT_NOTIFIED,
        /** READ mode: decode released prefill's blocks once its reads had drained. */
        READ_RELEASED,
        /** READ mode: decode did not release prefill's blocks within the read lease; they were freed anyway. */
        READ_LEASE_EXPIRED
    }

    /** {@code event} happened to transfer {@code transferId}. */
    default void record(Event event, String transferId) {
    }

    /** Transfer {@code transferId}'s write ended with {@code outcome}, {@code sinceOpen} after it was opened. */
    default void written(WriteOutcome outcome, Duration sinceOpen) {
    }
}
