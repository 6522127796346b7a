package dev.kvflux.pipeline.serve;

import java.util.concurrent.atomic.LongAdder;

/** Counters of one prefill instance's writes. Safe to read from any thread. */
public final class PrefillStats {
    final LongAdder requests = new LongAdder();
    final LongAdder writesDone = new LongAdder();
    final LongAdder writesFailed = new LongAdder();
    final LongAdder failedWaitsInProgress = new LongAdder();
    final LongAdder failuresNotNotified = new LongAdder();
    final LongAdder refusedQueueFull = new LongAdder();
    final LongAdder refusedOutOfBlocks = new LongAdder();
    final LongAdder aborted = new LongAdder();
    final LongAdder abortsForUnknown = new LongAdder();
    final LongAdder refusedFenced = new LongAdder();
    final LongAdder releasesSent = new LongAdder();
    final LongAdder stalledAtRelease = new LongAdder();
    final LongAdder staleIncarnation = new LongAdder();
    final LongAdder failedOnDecodeRestart = new LongAdder();
    final LongAdder pastDeadline = new LongAdder();

    /** Transfers aborted without a copy because their prompt finished prefilling after the transfer's deadline. */
    public long pastDeadline() {
        return pastDeadline.sum();
    }

    /** Completion requests accepted (queued for prefill). */
    public long requests() {
        return requests.sum();
    }

    /** Writes whose every status succeeded. */
    public long writesDone() {
        return writesDone.sum();
    }

    /** Writes that failed, for any reason. */
    public long writesFailed() {
        return writesFailed.sum();
    }

    /** Completion waits that failed with IN_PROGRESS: statuses still in flight at the transfer timeout. */
    public long failedWaitsInProgress() {
        return failedWaitsInProgress.sum();
    }

    /** Completion requests refused with 503 because the prefill queue was full. */
    public long refusedQueueFull() {
        return refusedQueueFull.sum();
    }

    /** Failed writes that decode was not told of (policies without failure notices). */
    public long failuresNotNotified() {
        return failuresNotNotified.sum();
    }

    /** Completion requests refused with 503 because too few KV blocks were free. */
    public long refusedOutOfBlocks() {
        return refusedOutOfBlocks.sum();
    }

    /** Transfers stopped by an {@code abort} (from decode or the proxy) or by their HTTP request's cancellation. */
    public long aborted() {
        return aborted.sum();
    }

    /** {@code abort} messages for a transfer prefill had not seen yet (its id is fenced from then on). */
    public long abortsForUnknown() {
        return abortsForUnknown.sum();
    }

    /** Completion requests refused because their transfer id was already aborted or finished. */
    public long refusedFenced() {
        return refusedFenced.sum();
    }

    /** {@code release} messages sent to decode, each once the transfer's copies were terminal. */
    public long releasesSent() {
        return releasesSent.sum();
    }

    /**
     * Transfers whose copies were still in flight when the drain before {@code release} timed out: their
     * source blocks were freed anyway and decode was sent no release (its lease reclaims the blocks).
     */
    public long stalledAtRelease() {
        return stalledAtRelease.sum();
    }

    /** Messages rejected because they came from a previous incarnation of decode. */
    public long staleIncarnation() {
        return staleIncarnation.sum();
    }

    /** Transfers failed at once because the decode they targeted restarted (a newer incarnation). */
    public long failedOnDecodeRestart() {
        return failedOnDecodeRestart.sum();
    }
}
