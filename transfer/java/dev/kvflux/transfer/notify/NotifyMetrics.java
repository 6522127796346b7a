package dev.kvflux.transfer.notify;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Counters of one notify endpoint (server, client and registry may share one), kept as Micrometer counters in
 * a {@link MeterRegistry} under {@code kvflux.notify.*} with the endpoint's common tags (a role's
 * {@code role} tag). All counters only grow; they are safe to update and read from any thread. The accessors
 * read the meters; {@link #snapshot()} gives them by name for logs and reports.
 *
 * <p>Meters: {@code kvflux.notify.messages.received}, {@code kvflux.notify.frames.rejected} (tag
 * {@code reason}: malformed, oversized, unauthenticated, invalid_utf8, internal_error; each closed its
 * connection), {@code kvflux.notify.handler.failures}, {@code kvflux.notify.connections.accepted},
 * {@code kvflux.notify.connections.closed} (tag {@code reason}: max_connections, frame_read_timeout,
 * buffer_budget, idle_timeout), {@code kvflux.notify.notices} (tag {@code result}: write_done, write_failed,
 * late_or_duplicate, unmatched), {@code kvflux.notify.early.dropped}, {@code kvflux.notify.deadlines.expired},
 * {@code kvflux.notify.messages.sent}, {@code kvflux.notify.send.retries},
 * {@code kvflux.notify.client.connections.opened}, {@code kvflux.notify.client.connections.closed} (tag
 * {@code reason}: idle) and {@code kvflux.notify.messages.undeliverable}.
 */
public final class NotifyMetrics {
    private final MeterRegistry registry;
    private final Tags tags;
    /** Messages that decoded and were handed on. */
    final Counter received;
    /** Frames that were not one message kvflux understands; each closed its connection. */
    final Counter malformedFrames;
    /** Frames whose length prefix was negative or above the maximum; each closed its connection. */
    final Counter oversizedFrames;
    /** Frames rejected by the notify secret (no tag, wrong tag, too old); each closed its connection. */
    final Counter unauthenticatedFrames;
    /** Frames with a string that is not well-formed UTF-8; each closed its connection. */
    final Counter invalidUtf8Frames;
    /** Frames whose handling failed inside kvflux (out of memory, a bug); each closed its connection. */
    final Counter frameInternalErrors;
    /** Inbound connections closed at once because the server already had its maximum open. */
    final Counter connectionsRejected;
    /** Inbound connections closed because a started frame did not complete within the frame read timeout. */
    final Counter frameReadTimeouts;
    /** Inbound connections closed because the server's partly received frames would have passed their byte budget. */
    final Counter bufferBudgetCloses;
    /** Inbound connections closed because nothing arrived on them within the idle timeout. */
    final Counter idleTimeouts;
    /** Early notifications or unclaimed block lists dropped to stay within their byte budget or count. */
    final Counter earlyDropped;
    /** Outbound connections closed after the client's idle limit with nothing in flight. */
    final Counter idleConnectionsClosed;
    /** Messages whose handler threw; each was acknowledged but not acted on, and its connection stayed open. */
    final Counter handlerFailures;
    /** Inbound connections accepted. */
    final Counter connectionsAccepted;
    /** write_done that completed an expected transfer. */
    final Counter writeDone;
    /** write_failed that failed an expected transfer. */
    final Counter writeFailed;
    /** Notifications for a transfer that had already finished (late or duplicate); ignored. */
    final Counter lateOrDuplicate;
    /** Notifications for a transfer nobody expects yet; kept until it is expected. */
    final Counter unmatched;
    /** Expected transfers that reached their receive deadline without a notification. */
    final Counter deadlinesExpired;
    /** Messages written to a peer. */
    final Counter sent;
    /** Send attempts that failed and were tried again. */
    final Counter sendRetries;
    /** Outbound connections opened (the first, and each one re-established after a failure). */
    final Counter connectionsOpened;
    /** Messages given up at their deadline after every attempt failed. */
    final Counter undeliverable;

    /** Counters of their own, in a registry of their own (for a channel used outside a role, and for tests). */
    public NotifyMetrics() {
        this(new SimpleMeterRegistry(), Tags.empty());
    }

    /** Counters registered in {@code registry}, each with {@code tags} besides its own. */
    public NotifyMetrics(MeterRegistry registry, Tags tags) {
        this.registry = Objects.requireNonNull(registry, "registry");
        this.tags = Objects.requireNonNull(tags, "tags");
        received = counter("kvflux.notify.messages.received", "Messages that decoded and were handed on");
        String rejected = "kvflux.notify.frames.rejected";
        String rejectedHelp = "Frames rejected, by reason; each closed its connection";
        malformedFrames = counter(rejected, rejectedHelp, "reason", "malformed");
        oversizedFrames = counter(rejected, rejectedHelp, "reason", "oversized");
        unauthenticatedFrames = counter(rejected, rejectedHelp, "reason", "unauthenticated");
        invalidUtf8Frames = counter(rejected, rejectedHelp, "reason", "invalid_utf8");
        frameInternalErrors = counter(rejected, rejectedHelp, "reason", "internal_error");
        handlerFailures = counter("kvflux.notify.handler.failures",
                "Messages whose handler threw; acknowledged but not acted on");
        connectionsAccepted = counter("kvflux.notify.connections.accepted", "Inbound notify connections accepted");
        String closed = "kvflux.notify.connections.closed";
        String closedHelp = "Inbound notify connections closed by the server, by reason";
        connectionsRejected = counter(closed, closedHelp, "reason", "max_connections");
        frameReadTimeouts = counter(closed, closedHelp, "reason", "frame_read_timeout");
        bufferBudgetCloses = counter(closed, closedHelp, "reason", "buffer_budget");
        idleTimeouts = counter(closed, closedHelp, "reason", "idle_timeout");
        String notices = "kvflux.notify.notices";
        String noticesHelp = "Transfer notices received, by what they did";
        writeDone = counter(notices, noticesHelp, "result", "write_done");
        writeFailed = counter(notices, noticesHelp, "result", "write_failed");
        lateOrDuplicate = counter(notices, noticesHelp, "result", "late_or_duplicate");
        unmatched = counter(notices, noticesHelp, "result", "unmatched");
        earlyDropped = counter("kvflux.notify.early.dropped",
                "Early notifications or unclaimed block lists dropped to stay within their budget");
        deadlinesExpired = counter("kvflux.notify.deadlines.expired",
                "Expected transfers whose receive deadline passed without a notification");
        sent = counter("kvflux.notify.messages.sent", "Messages delivered to a peer (acknowledged)");
        sendRetries = counter("kvflux.notify.send.retries", "Send attempts that failed and were tried again");
        connectionsOpened = counter("kvflux.notify.client.connections.opened", "Outbound notify connections opened");
        idleConnectionsClosed = counter("kvflux.notify.client.connections.closed",
                "Outbound notify connections closed, by reason", "reason", "idle");
        undeliverable = counter("kvflux.notify.messages.undeliverable",
                "Messages given up at their deadline after every attempt failed");
    }

    private Counter counter(String name, String help, String... tagKeyValues) {
        return Counter.builder(name).description(help).tags(tags).tags(tagKeyValues).register(registry);
    }

    /** The registry the counters are in. */
    public MeterRegistry registry() {
        return registry;
    }

    /** The tags every counter carries besides its own. */
    public Tags tags() {
        return tags;
    }

    private static long count(Counter counter) {
        return (long) counter.count();
    }

    public long received() {
        return count(received);
    }

    public long malformedFrames() {
        return count(malformedFrames);
    }

    public long oversizedFrames() {
        return count(oversizedFrames);
    }

    public long unauthenticatedFrames() {
        return count(unauthenticatedFrames);
    }

    public long invalidUtf8Frames() {
        return count(invalidUtf8Frames);
    }

    public long frameInternalErrors() {
        return count(frameInternalErrors);
    }

    public long connectionsRejected() {
        return count(connectionsRejected);
    }

    public long frameReadTimeouts() {
        return count(frameReadTimeouts);
    }

    public long bufferBudgetCloses() {
        return count(bufferBudgetCloses);
    }

    public long idleTimeouts() {
        return count(idleTimeouts);
    }

    public long earlyDropped() {
        return count(earlyDropped);
    }

    /** Counts one early notification or unclaimed block list dropped to stay within its budget. */
    public void recordEarlyDropped() {
        earlyDropped.increment();
    }

    public long idleConnectionsClosed() {
        return count(idleConnectionsClosed);
    }

    public long handlerFailures() {
        return count(handlerFailures);
    }

    public long connectionsAccepted() {
        return count(connectionsAccepted);
    }

    public long writeDone() {
        return count(writeDone);
    }

    public long writeFailed() {
        return count(writeFailed);
    }

    public long lateOrDuplicate() {
        return count(lateOrDuplicate);
    }

    public long unmatched() {
        return count(unmatched);
    }

    public long deadlinesExpired() {
        return count(deadlinesExpired);
    }

    public long sent() {
        return count(sent);
    }

    public long sendRetries() {
        return count(sendRetries);
    }

    public long connectionsOpened() {
        return count(connectionsOpened);
    }

    public long undeliverable() {
        return count(undeliverable);
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
