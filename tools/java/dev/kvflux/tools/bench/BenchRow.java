package dev.kvflux.tools.bench;

import dev.kvflux.transfer.TpRanks;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.transfer.KvMode;

/**
 * One line of the serving benchmark: a policy at a concurrency, what the client saw and what prefill and
 * decode counted.
 *
 * @param failedWaitsInProgress prefill's completion waits that failed with IN_PROGRESS
 * @param injectedFaults batches given an injected failure
 * @param writeFailedNotices {@code write_failed} notices decode received
 * @param decodeDeadlines decode requests that hit their receive deadline
 * @param kvMode who moved the KV (WRITE: prefill wrote into decode; READ: decode read from prefill)
 * @param tp how many ranks prefill and decode ran
 * @param handover the requests' handover stages on one clock; null when the roles ran as processes of their own
 */
public record BenchRow(Policy policy, int concurrency, int numPrompts, LoadResult load, long failedWaitsInProgress,
                       int injectedFaults, long writeFailedNotices, long decodeDeadlines, KvMode kvMode, TpRanks tp,
                       HandoverLog.Figures handover) {
    /** A row without handover stages. */
    public BenchRow(Policy policy, int concurrency, int numPrompts, LoadResult load, long failedWaitsInProgress,
            int injectedFaults, long writeFailedNotices, long decodeDeadlines, KvMode kvMode, TpRanks tp) {
        this(policy, concurrency, numPrompts, load, failedWaitsInProgress, injectedFaults, writeFailedNotices,
                decodeDeadlines, kvMode, tp, null);
    }

    /** A row of roles of one rank each. */
    public BenchRow(Policy policy, int concurrency, int numPrompts, LoadResult load, long failedWaitsInProgress,
            int injectedFaults, long writeFailedNotices, long decodeDeadlines, KvMode kvMode) {
        this(policy, concurrency, numPrompts, load, failedWaitsInProgress, injectedFaults, writeFailedNotices,
                decodeDeadlines, kvMode, TpRanks.SINGLE);
    }

    /** A row of a WRITE-mode run. */
    public BenchRow(Policy policy, int concurrency, int numPrompts, LoadResult load, long failedWaitsInProgress,
            int injectedFaults, long writeFailedNotices, long decodeDeadlines) {
        this(policy, concurrency, numPrompts, load, failedWaitsInProgress, injectedFaults, writeFailedNotices,
                decodeDeadlines, KvMode.WRITE);
    }
}
