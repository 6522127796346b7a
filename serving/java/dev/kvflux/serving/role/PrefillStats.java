package dev.kvflux.serving.role;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.PrefillRecorder;
import io.micrometer.core.instrument.Counter;
import java.time.Duration;

/**
 * Counters of one prefill instance's writes, kept as meters of the role ({@link RoleMetrics}); the accessors
 * read them. Safe to update and read from any thread.
 *
 * <p>Meters: {@code kvflux.prefill.requests}; {@code kvflux.prefill.requests.refused} (tag {@code reason}:
 * queue_full, out_of_blocks, fenced); the timer {@code kvflux.prefill.writes} from the request's arrival to
 * its write's outcome (tags {@code outcome}: write_done or write_failed, and {@code code}: the status code);
 * {@code kvflux.prefill.writes.unnotified}; {@code kvflux.prefill.transfers.aborted};
 * {@code kvflux.prefill.aborts.unknown}; {@code kvflux.prefill.transfers.past.deadline};
 * {@code kvflux.prefill.releases.sent}; {@code kvflux.prefill.releases.stalled};
 * {@code kvflux.notify.messages.stale}; {@code kvflux.prefill.transfers.failed.peer.restart}.
 */
public final class PrefillStats implements PrefillRecorder {
    /** The timer of writes, from the request's arrival to the outcome. */
    static final String WRITES = "kvflux.prefill.writes";

    private final RoleMetrics meters;
    final Counter requests;
    final Counter failuresNotNotified;
    final Counter readReleases;
    final Counter readLeasesExpired;
    final Counter refusedQueueFull;
    final Counter refusedClientShare;
    final Counter refusedOutOfBlocks;
    final Counter aborted;
    final Counter abortsForUnknown;
    final Counter refusedFenced;
    final Counter releasesSent;
    final Counter stalledAtRelease;
    final Counter staleIncarnation;
    final Counter failedOnDecodeRestart;
    final Counter pastDeadline;

    PrefillStats(RoleMetrics meters) {
        this.meters = meters;
        requests = meters.counter("kvflux.prefill.requests", "Completion requests accepted (queued for prefill)");
        String refused = "kvflux.prefill.requests.refused";
        String refusedHelp = "Completion requests refused at once, by reason";
        refusedQueueFull = meters.counter(refused, refusedHelp, "reason", "queue_full");
        refusedClientShare = meters.counter(refused, refusedHelp, "reason", "client_share");
        refusedOutOfBlocks = meters.counter(refused, refusedHelp, "reason", "out_of_blocks");
        refusedFenced = meters.counter(refused, refusedHelp, "reason", "fenced");
        failuresNotNotified = meters.counter("kvflux.prefill.writes.unnotified",
                "Failed writes that decode was not told of (policies without failure notices)");
        String reads = "kvflux.prefill.read.holds.ended";
        String readsHelp = "READ mode: transfers whose blocks prefill held for decode's reads, by how the hold ended";
        readReleases = meters.counter(reads, readsHelp, "by", "release");
        readLeasesExpired = meters.counter(reads, readsHelp, "by", "lease");
        aborted = meters.counter("kvflux.prefill.transfers.aborted",
                "Transfers stopped by an abort or by their HTTP request's cancellation");
        abortsForUnknown = meters.counter("kvflux.prefill.aborts.unknown",
                "Abort messages for a transfer prefill had not seen (its id is fenced)");
        pastDeadline = meters.counter("kvflux.prefill.transfers.past.deadline",
                "Transfers aborted without a copy because their prompt finished after the transfer's deadline");
        releasesSent = meters.counter("kvflux.prefill.releases.sent",
                "Release messages sent to decode once a transfer's copies were terminal");
        stalledAtRelease = meters.counter("kvflux.prefill.releases.stalled",
                "Transfers whose copies were still in flight when the drain before release timed out");
        staleIncarnation = meters.counter("kvflux.notify.messages.stale",
                "Messages rejected because they came from or were meant for another incarnation of the peer");
        failedOnDecodeRestart = meters.counter("kvflux.prefill.transfers.failed.peer.restart",
                "Transfers failed at once because the decode they targeted restarted");
        // both outcomes are exported from the start, so a rate over them exists before the first write ends
        write(true, StatusCode.SUCCESS);
        write(false, StatusCode.IN_PROGRESS);
    }

    @Override
    public void record(PrefillRecorder.Event event, String transferId) {
        switch (event) {
            case REFUSED_DUPLICATE -> refusedFenced.increment();
            case REFUSED_OUT_OF_BLOCKS -> refusedOutOfBlocks.increment();
            case ABORTED -> aborted.increment();
            case ABORT_FOR_UNKNOWN -> abortsForUnknown.increment();
            case STALE_INCARNATION -> staleIncarnation.increment();
            case FAILED_ON_DECODE_RESTART -> failedOnDecodeRestart.increment();
            case PAST_DEADLINE -> pastDeadline.increment();
            case STALLED_AT_RELEASE -> stalledAtRelease.increment();
            case RELEASE_SENT -> releasesSent.increment();
            case FAILURE_NOT_NOTIFIED -> failuresNotNotified.increment();
            case READ_RELEASED -> readReleases.increment();
            case READ_LEASE_EXPIRED -> readLeasesExpired.increment();
        }
    }

    /** Records a write's outcome, {@code took} after its transfer was opened (its request arrived). */
    @Override
    public void written(WriteOutcome outcome, Duration took) {
        switch (outcome) {
            case WriteOutcome.WriteDone done -> write(true, StatusCode.SUCCESS).record(took);
            case WriteOutcome.WriteFailed failed -> write(false, failed.code()).record(took);
        }
    }

    /**
     * Each write's copied bytes over the wall-clock time from its first post to its last copy's end
     * ({@code kvflux_transfer_bytes_per_second}): one span per transfer, not a sum of its batches' overlapping
     * spans, which would count time twice and report less than the link moved. Written only when the engine tells
     * when its copies end.
     */
    io.micrometer.core.instrument.DistributionSummary throughput() {
        return meters.summary("kvflux.transfer.bytes.per.second", "Bytes each write copied over the time from its"
                + " first post to its last copy's end", THROUGHPUT_BUCKETS);
    }

    /** 1 MB/s to 1 TB/s, three buckets a decade. */
    private static final double[] THROUGHPUT_BUCKETS = java.util.stream.IntStream.rangeClosed(0, 18)
            .mapToDouble(i -> Math.pow(10, 6 + i / 3.0)).toArray();

    private io.micrometer.core.instrument.Timer write(boolean done, StatusCode code) {
        return meters.timer(WRITES, "Writes from the request's arrival to their outcome, by outcome and status code",
                "outcome", done ? "write_done" : "write_failed", "code", code.name());
    }

    /** Transfers aborted without a copy because their prompt finished prefilling after the transfer's deadline. */
    public long pastDeadline() {
        return count(pastDeadline);
    }

    /** Completion requests accepted (queued for prefill). */
    public long requests() {
        return count(requests);
    }

    /** Writes whose every status succeeded. */
    public long writesDone() {
        return meters.timerCount(WRITES, "outcome", "write_done");
    }

    /** Writes that failed, for any reason. */
    public long writesFailed() {
        return meters.timerCount(WRITES, "outcome", "write_failed");
    }

    /** Completion waits that failed with IN_PROGRESS: statuses still in flight at the transfer timeout. */
    public long failedWaitsInProgress() {
        return meters.timerCount(WRITES, "outcome", "write_failed", "code", StatusCode.IN_PROGRESS.name());
    }

    /** Completion requests refused with 503 because the prefill queue was full. */
    public long refusedQueueFull() {
        return count(refusedQueueFull);
    }

    /** Failed writes that decode was not told of (policies without failure notices). */
    public long failuresNotNotified() {
        return count(failuresNotNotified);
    }

    /** Completion requests refused with 503 because too few KV blocks were free. */
    public long refusedOutOfBlocks() {
        return count(refusedOutOfBlocks);
    }

    /** Transfers stopped by an {@code abort} (from decode or the proxy) or by their HTTP request's cancellation. */
    public long aborted() {
        return count(aborted);
    }

    /** {@code abort} messages for a transfer prefill had not seen yet (its id is fenced from then on). */
    public long abortsForUnknown() {
        return count(abortsForUnknown);
    }

    /** Completion requests refused because their transfer id was already aborted or finished. */
    public long refusedFenced() {
        return count(refusedFenced);
    }

    /** {@code release} messages sent to decode, each once the transfer's copies were terminal. */
    public long releasesSent() {
        return count(releasesSent);
    }

    /**
     * Transfers whose copies were still in flight when the drain before {@code release} timed out: their
     * source blocks were freed anyway and decode was sent no release (its lease reclaims the blocks).
     */
    public long stalledAtRelease() {
        return count(stalledAtRelease);
    }

    /** Messages rejected because they came from a previous incarnation of decode. */
    public long staleIncarnation() {
        return count(staleIncarnation);
    }

    /** Transfers failed at once because the decode they targeted restarted (a newer incarnation). */
    public long failedOnDecodeRestart() {
        return count(failedOnDecodeRestart);
    }

    static long count(Counter counter) {
        return (long) counter.count();
    }
}
