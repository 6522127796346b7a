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
}
