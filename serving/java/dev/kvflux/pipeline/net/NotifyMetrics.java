package dev.kvflux.pipeline.net;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counters of one notify endpoint (server, client and registry may share one). All counters only grow;
 * they are safe to update and read from any thread. {@link #snapshot()} gives them by name for logs and
 * reports.
 */
public final class NotifyMetrics {
    /** Messages that decoded and were handed on. */
    final LongAdder received = new LongAdder();
    /** Frames that were not one message kvflux understands; each closed its connection. */
    final LongAdder malformedFrames = new LongAdder();
    /** Frames whose length prefix was negative or above the maximum; each closed its connection. */
    final LongAdder oversizedFrames = new LongAdder();
    /** Frames rejected by the notify secret (no tag, wrong tag, too old); each closed its connection. */
    final LongAdder unauthenticatedFrames = new LongAdder();
    /** Frames with a string that is not well-formed UTF-8; each closed its connection. */
    final LongAdder invalidUtf8Frames = new LongAdder();
    /** Frames whose handling failed inside kvflux (out of memory, a bug); each closed its connection. */
    final LongAdder frameInternalErrors = new LongAdder();
    /** Inbound connections closed at once because the server already had its maximum open. */
    final LongAdder connectionsRejected = new LongAdder();
    /** Inbound connections closed because a started frame did not complete within the frame read timeout. */
    final LongAdder frameReadTimeouts = new LongAdder();
    /** Inbound connections closed because the server's partly received frames would have passed their byte budget. */
    final LongAdder bufferBudgetCloses = new LongAdder();
    /** Inbound connections closed because nothing arrived on them within the idle timeout. */
    final LongAdder idleTimeouts = new LongAdder();
    /** Early notifications or unclaimed block lists dropped to stay within their byte budget or count. */
    final LongAdder earlyDropped = new LongAdder();
    /** Outbound connections closed after the client's idle limit with nothing in flight. */
    final LongAdder idleConnectionsClosed = new LongAdder();
    /** Messages whose handler threw; each was acknowledged but not acted on, and its connection stayed open. */
    final LongAdder handlerFailures = new LongAdder();
    /** Inbound connections accepted. */
    final LongAdder connectionsAccepted = new LongAdder();
    /** write_done that completed an expected transfer. */
    final LongAdder writeDone = new LongAdder();
    /** write_failed that failed an expected transfer. */
    final LongAdder writeFailed = new LongAdder();
    /** Notifications for a transfer that had already finished (late or duplicate); ignored. */
    final LongAdder lateOrDuplicate = new LongAdder();
    /** Notifications for a transfer nobody expects yet; kept until it is expected. */
    final LongAdder unmatched = new LongAdder();
    /** Expected transfers that reached their receive deadline without a notification. */
    final LongAdder deadlinesExpired = new LongAdder();
    /** Messages written to a peer. */
    final LongAdder sent = new LongAdder();
    /** Send attempts that failed and were tried again. */
    final LongAdder sendRetries = new LongAdder();
    /** Outbound connections opened (the first, and each one re-established after a failure). */
    final LongAdder connectionsOpened = new LongAdder();
    /** Messages given up at their deadline after every attempt failed. */
    final LongAdder undeliverable = new LongAdder();

    public long received() {
        return received.sum();
    }

    public long malformedFrames() {
        return malformedFrames.sum();
    }

    public long oversizedFrames() {
        return oversizedFrames.sum();
    }

    public long unauthenticatedFrames() {
        return unauthenticatedFrames.sum();
    }

    public long invalidUtf8Frames() {
        return invalidUtf8Frames.sum();
    }

    public long frameInternalErrors() {
        return frameInternalErrors.sum();
    }

    public long connectionsRejected() {
        return connectionsRejected.sum();
    }

    public long frameReadTimeouts() {
        return frameReadTimeouts.sum();
    }

    public long bufferBudgetCloses() {
        return bufferBudgetCloses.sum();
    }

    public long idleTimeouts() {
        return idleTimeouts.sum();
    }

    public long earlyDropped() {
        return earlyDropped.sum();
    }

    /** Counts one early notification or unclaimed block list dropped to stay within its budget. */
    public void recordEarlyDropped() {
        earlyDropped.increment();
    }

    public long idleConnectionsClosed() {
        return idleConnectionsClosed.sum();
    }

    public long handlerFailures() {
        return handlerFailures.sum();
    }

    public long connectionsAccepted() {
        return connectionsAccepted.sum();
    }

    public long writeDone() {
        return writeDone.sum();
    }

    public long writeFailed() {
        return writeFailed.sum();
    }

    public long lateOrDuplicate() {
        return lateOrDuplicate.sum();
    }

    public long unmatched() {
        return unmatched.sum();
    }

    public long deadlinesExpired() {
        return deadlinesExpired.sum();
    }

    public long sent() {
        return sent.sum();
    }

    public long sendRetries() {
        return sendRetries.sum();
    }

    public long connectionsOpened() {
        return connectionsOpened.sum();
    }

    public long undeliverable() {
        return undeliverable.sum();
    }

    /** Every counter by its snake_case name, in a stable order. */
    public Map<String, Long> snapshot() {
        Map<String, Long> all = new LinkedHashMap<>();
        all.put("received", received());
        all.put("malformed_frames", malformedFrames());
        all.put("oversized_frames", oversizedFrames());
        all.put("unauthenticated_frames", unauthenticatedFrames());
        all.put("invalid_utf8_frames", invalidUtf8Frames());
        all.put("frame_internal_errors", frameInternalErrors());
        all.put("handler_failures", handlerFailures());
        all.put("connections_accepted", connectionsAccepted());
        all.put("connections_rejected", connectionsRejected());
        all.put("frame_read_timeouts", frameReadTimeouts());
        all.put("buffer_budget_closes", bufferBudgetCloses());
        all.put("idle_timeouts", idleTimeouts());
        all.put("write_done", writeDone());
        all.put("write_failed", writeFailed());
        all.put("late_or_duplicate", lateOrDuplicate());
        all.put("unmatched", unmatched());
        all.put("early_dropped", earlyDropped());
        all.put("deadlines_expired", deadlinesExpired());
        all.put("sent", sent());
        all.put("send_retries", sendRetries());
        all.put("connections_opened", connectionsOpened());
        all.put("idle_connections_closed", idleConnectionsClosed());
        all.put("undeliverable", undeliverable());
        return all;
    }

    @Override
    public String toString() {
        return "NotifyMetrics" + snapshot();
    }
}
