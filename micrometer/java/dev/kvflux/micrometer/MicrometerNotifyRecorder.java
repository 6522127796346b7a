package dev.kvflux.micrometer;

import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyRecorder;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * A notify endpoint's reports ({@link NotifyEvent}) as Micrometer counters in a {@link MeterRegistry}, each with the
 * given common tags (a role's {@code role} tag). Every counter is registered at construction, so a rate over it
 * exists before its first event. Thread-safe.
 *
 * <p>Meters: {@code kvflux.notify.messages.received}, {@code kvflux.notify.frames.rejected} (tag {@code reason}:
 * malformed, oversized, unauthenticated, invalid_utf8, internal_error; each closed its connection),
 * {@code kvflux.notify.handler.failures}, {@code kvflux.notify.connections.accepted},
 * {@code kvflux.notify.connections.closed} (tag {@code reason}: max_connections, frame_read_timeout, buffer_budget,
 * idle_timeout), {@code kvflux.notify.notices} (tag {@code result}: write_done, write_failed, late_or_duplicate,
 * unmatched), {@code kvflux.notify.early.dropped}, {@code kvflux.notify.deadlines.expired},
 * {@code kvflux.notify.messages.sent}, {@code kvflux.notify.send.retries},
 * {@code kvflux.notify.client.connections.opened}, {@code kvflux.notify.client.connections.closed} (tag
 * {@code reason}: idle) and {@code kvflux.notify.messages.undeliverable}.
 *
 * <p>Needs {@code dev.kvflux:kvflux-transfer} on the class path (an optional dependency of this artifact).
 */
public final class MicrometerNotifyRecorder implements NotifyRecorder {
    private final MeterRegistry registry;
    private final Tags tags;
    private final Map<NotifyEvent, Counter> counters = new EnumMap<>(NotifyEvent.class);

    private MicrometerNotifyRecorder(MeterRegistry registry, Tags tags) {
        this.registry = Objects.requireNonNull(registry, "registry");
        this.tags = Objects.requireNonNull(tags, "tags");
        for (NotifyEvent event : NotifyEvent.values()) {
            counters.put(event, counter(event));
        }
    }

    /** Counters in {@code registry}, each tagged {@code tags} besides its own. */
    public static MicrometerNotifyRecorder of(MeterRegistry registry, Tags tags) {
        return new MicrometerNotifyRecorder(registry, tags);
    }

    /** Counters in {@code registry} with no common tags. */
    public static MicrometerNotifyRecorder of(MeterRegistry registry) {
        return of(registry, Tags.empty());
    }

    @Override
    public void record(NotifyEvent event) {
        counters.get(event).increment();
    }

    /** How many times {@code event} was recorded. */
    public long count(NotifyEvent event) {
        return (long) counters.get(event).count();
    }

    /** Every count by its event's lower-case name, in the events' order, for logs and reports. */
    public Map<String, Long> snapshot() {
        Map<String, Long> all = new LinkedHashMap<>();
        for (NotifyEvent event : NotifyEvent.values()) {
            all.put(event.name().toLowerCase(Locale.ROOT), count(event));
        }
        return all;
    }

    /** The registry the counters are in. */
    public MeterRegistry registry() {
        return registry;
    }

    private Counter counter(NotifyEvent event) {
        String rejected = "kvflux.notify.frames.rejected";
        String rejectedHelp = "Frames rejected, by reason; each closed its connection";
        String closed = "kvflux.notify.connections.closed";
        String closedHelp = "Inbound notify connections closed by the server, by reason";
        String notices = "kvflux.notify.notices";
        String noticesHelp = "Transfer notices received, by what they did";
        return switch (event) {
            case RECEIVED -> counter("kvflux.notify.messages.received", "Messages that decoded and were handed on");
            case REJECTED_MALFORMED -> counter(rejected, rejectedHelp, "reason", "malformed");
            case REJECTED_OVERSIZED -> counter(rejected, rejectedHelp, "reason", "oversized");
            case REJECTED_UNAUTHENTICATED -> counter(rejected, rejectedHelp, "reason", "unauthenticated");
            case REJECTED_INVALID_UTF8 -> counter(rejected, rejectedHelp, "reason", "invalid_utf8");
            case REJECTED_INTERNAL_ERROR -> counter(rejected, rejectedHelp, "reason", "internal_error");
            case HANDLER_FAILED -> counter("kvflux.notify.handler.failures",
                    "Messages whose handler threw; acknowledged but not acted on");
            case CONNECTION_ACCEPTED -> counter("kvflux.notify.connections.accepted",
                    "Inbound notify connections accepted");
            case CLOSED_MAX_CONNECTIONS -> counter(closed, closedHelp, "reason", "max_connections");
            case CLOSED_FRAME_READ_TIMEOUT -> counter(closed, closedHelp, "reason", "frame_read_timeout");
            case CLOSED_BUFFER_BUDGET -> counter(closed, closedHelp, "reason", "buffer_budget");
            case CLOSED_IDLE_TIMEOUT -> counter(closed, closedHelp, "reason", "idle_timeout");
            case READS_THROTTLED -> counter("kvflux.notify.reads.throttled",
                    "Times an inbound connection's reads were held back to the server's bulk rate");
            case NOTICE_WRITE_DONE -> counter(notices, noticesHelp, "result", "write_done");
            case NOTICE_WRITE_FAILED -> counter(notices, noticesHelp, "result", "write_failed");
            case NOTICE_LATE_OR_DUPLICATE -> counter(notices, noticesHelp, "result", "late_or_duplicate");
            case NOTICE_UNMATCHED -> counter(notices, noticesHelp, "result", "unmatched");
            case EARLY_DROPPED -> counter("kvflux.notify.early.dropped",
                    "Early notifications or unclaimed block lists dropped to stay within their budget");
            case DEADLINE_EXPIRED -> counter("kvflux.notify.deadlines.expired",
                    "Expected transfers whose receive deadline passed without a notification");
            case SENT -> counter("kvflux.notify.messages.sent", "Messages delivered to a peer (acknowledged)");
            case SEND_RETRIED -> counter("kvflux.notify.send.retries", "Send attempts that failed and were tried again");
            case CLIENT_CONNECTION_OPENED -> counter("kvflux.notify.client.connections.opened",
                    "Outbound notify connections opened");
            case CLIENT_CONNECTION_CLOSED_IDLE -> counter("kvflux.notify.client.connections.closed",
                    "Outbound notify connections closed, by reason", "reason", "idle");
            case UNDELIVERABLE -> counter("kvflux.notify.messages.undeliverable",
                    "Messages given up at their deadline after every attempt failed");
        };
    }

    private Counter counter(String name, String help, String... tagKeyValues) {
        return Counter.builder(name).description(help).tags(tags).tags(tagKeyValues).register(registry);
    }
}
