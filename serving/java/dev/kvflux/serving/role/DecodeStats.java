package dev.kvflux.serving.role;

import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.DecodeRecorder;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Timer;
import java.util.concurrent.TimeUnit;

/**
 * Decode's counters beyond the notify channel's, as meters of the role: {@code kvflux.decode.aborts.sent},
 * {@code kvflux.decode.releases} (tag {@code result}: held, or unknown when no blocks were held for it),
 * {@code kvflux.decode.releases.before.request}, {@code kvflux.decode.requests.refused} (tag {@code reason}:
 * out_of_blocks, shutting_down), {@code kvflux.notify.messages.stale}, {@code kvflux.decode.kv.checks} (tag
 * {@code result}: verified, corrupt), {@code kvflux.decode.requests.failed.peer.restart}, and the timer
 * {@code kvflux.decode.kv.wait} from a request's arrival to the end of its wait for the KV (tag {@code outcome}).
 */
final class DecodeStats implements DecodeRecorder {
    private final RoleMetrics meters;
    private final Counter abortsSent;
    private final Counter releases;
    private final Counter releasesUnknown;
    private final Counter releasesBeforeRequest;
    private final Counter refusedOutOfBlocks;
    private final Counter refusedShuttingDown;
    private final Counter staleIncarnation;
    private final Counter corruptKv;
    private final Counter failedOnPrefillRestart;
    private final Counter kvVerified;
    private final Counter readReleasesSent;

    DecodeStats(RoleMetrics meters) {
        this.meters = meters;
        abortsSent = meters.counter("kvflux.decode.aborts.sent", "Abort messages sent to prefill");
        String releasesName = "kvflux.decode.releases";
        String releasesHelp = "Release messages from prefill, by whether they found blocks held";
        releases = meters.counter(releasesName, releasesHelp, "result", "held");
        releasesUnknown = meters.counter(releasesName, releasesHelp, "result", "unknown");
        releasesBeforeRequest = meters.counter("kvflux.decode.releases.before.request",
                "Releases that came before their request's blocks, applied when the blocks were granted");
        String refused = "kvflux.decode.requests.refused";
        String refusedHelp = "Requests refused at once, by reason";
        refusedOutOfBlocks = meters.counter(refused, refusedHelp, "reason", "out_of_blocks");
        refusedShuttingDown = meters.counter(refused, refusedHelp, "reason", "shutting_down");
        staleIncarnation = meters.counter("kvflux.notify.messages.stale",
                "Messages rejected because they came from or were meant for another incarnation of the peer");
        String checks = "kvflux.decode.kv.checks";
        String checksHelp = "Checks of the KV prefill computed against the blocks decode holds, by result";
        kvVerified = meters.counter(checks, checksHelp, "result", "verified");
        corruptKv = meters.counter(checks, checksHelp, "result", "corrupt");
        failedOnPrefillRestart = meters.counter("kvflux.decode.requests.failed.peer.restart",
                "Requests failed at once because the prefill their KV was to come from restarted");
        readReleasesSent = meters.counter("kvflux.decode.read.releases.sent",
                "READ mode: releases sent to prefill once a request's reads had drained");
        kvWait(WaitOutcome.WRITE_DONE);
        kvWait(WaitOutcome.WRITE_FAILED);
    }

    @Override
    public void record(Event event, String transferId) {
        Counter counter = switch (event) {
            case REFUSED_OUT_OF_BLOCKS -> refusedOutOfBlocks;
            case REFUSED_SHUTTING_DOWN -> refusedShuttingDown;
            case ABORT_SENT -> abortsSent;
            case RELEASE -> releases;
            case RELEASE_UNKNOWN -> releasesUnknown;
            case RELEASE_BEFORE_REQUEST -> releasesBeforeRequest;
            case STALE_INCARNATION -> staleIncarnation;
            case KV_VERIFIED -> kvVerified;
            case KV_CORRUPT -> corruptKv;
            case FAILED_ON_PREFILL_RESTART -> failedOnPrefillRestart;
            case READ_RELEASE_SENT -> readReleasesSent;
        };
        counter.increment();
    }

    @Override
    public void kvWaitEnded(WaitOutcome outcome, long nanos) {
        kvWait(outcome).record(nanos, TimeUnit.NANOSECONDS);
    }

    private Timer kvWait(WaitOutcome outcome) {
        return meters.timer("kvflux.decode.kv.wait",
                "From a request's arrival to the end of its wait for the KV, by outcome", "outcome", outcome.tag());
    }
}
