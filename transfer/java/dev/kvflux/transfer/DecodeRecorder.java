package dev.kvflux.transfer;

import java.util.Locale;

/**
 * Where a {@link DecodeSide} reports what became of its transfers; {@link #NOOP} by default. Called on whichever
 * thread the event happened on (a notify event loop, a timer, the caller's): an implementation must be
 * thread-safe, quick, and must not block.
 */
public interface DecodeRecorder {
    /** Records nothing. */
    DecodeRecorder NOOP = new DecodeRecorder() { };

    /** Things that happen to decode's transfers, one report each. */
    enum Event {
        /** A transfer was refused at {@link DecodeSide#open}: fewer blocks were free than it needs. */
        REFUSED_OUT_OF_BLOCKS,
        /** A transfer was refused at {@link DecodeSide#open}: decode is shutting down. */
        REFUSED_SHUTTING_DOWN,
        /** An {@code abort} was sent to prefill (the transfer ended before prefill said how its write ended). */
        ABORT_SENT,
        /** A {@code release} freed (or marked for freeing) a transfer's blocks. */
        RELEASE,
        /** A {@code release} named a transfer that holds no blocks (late, repeated, or before its request). */
        RELEASE_UNKNOWN,
        /** A {@code release} came before its transfer's blocks; applied when they were granted. */
        RELEASE_BEFORE_REQUEST,
        /** A message from an older incarnation of prefill, or about another incarnation's blocks, was dropped. */
        STALE_INCARNATION,
        /** {@code write_done}'s content check matched the granted blocks. */
        KV_VERIFIED,
        /** {@code write_done}'s content check did not match: the transfer failed as corrupt. */
        KV_CORRUPT,
        /** A transfer failed at once because the prefill it waited on restarted. */
        FAILED_ON_PREFILL_RESTART,
        /** READ mode: decode's reads of a transfer drained and prefill was sent {@code release}. */
        READ_RELEASE_SENT
    }

    /** How a wait for a transfer's KV ended, for {@link #kvWaitEnded}. */
    enum WaitOutcome {
        WRITE_DONE, WRITE_FAILED, CORRUPT, DEADLINE, UNDELIVERABLE, PREFILL_RESTARTED, SHUTTING_DOWN, DUPLICATE,
        CANCELLED, ERROR, READ_FAILED;

        /** The lower-case name, as a meter's tag value: {@code write_done}. */
        public String tag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** {@code event} happened to transfer {@code transferId}. */
    default void record(Event event, String transferId) {
    }

    /** A wait for a transfer's KV ended with {@code outcome}, {@code nanos} after the transfer was opened. */
    default void kvWaitEnded(WaitOutcome outcome, long nanos) {
    }
}
