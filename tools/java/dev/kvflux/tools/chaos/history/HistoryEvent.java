package dev.kvflux.tools.chaos.history;

import java.util.List;
import java.util.Objects;
import java.util.stream.Collectors;

/**
 * One line of a history log: an event of a prefill or decode side ({@code dev.kvflux.transfer.TransferHistory}, as
 * {@code dev.kvflux.serving.observe.HistoryLog} writes it) or a client's outcome ({@link ClientOutcomes}).
 *
 * @param micros the wall clock when it happened, in microseconds
 * @param role {@code prefill}, {@code decode} or {@code client}
 * @param kind the event's kind, lower case ({@code opened}, {@code received}, {@code outcome}, …)
 * @param transfer the transfer id; empty where none (a side's start, a client request refused before it had one)
 * @param incarnation the side's incarnation (0 for the client)
 * @param message the notify message's type ({@code write_done}), or empty
 * @param from the incarnation the message names as its sender's, or 0
 * @param to the incarnation the message is about ({@code to_incarnation}), or 0
 * @param blocks block ids, where the kind has them
 * @param detail a peer's address, an outcome or a reason
 * @param index the client's request index, or -1
 * @param source the file it was read from, and its line
 */
public record HistoryEvent(long micros, String role, String kind, String transfer, long incarnation, String message,
        long from, long to, List<Long> blocks, String detail, int index, String source) {
    /** The kinds of events, as the logs name them. */
    static final String STARTED = "started";
    static final String STOPPED = "stopped";
    static final String OPENED = "opened";
    static final String SENT = "sent";
    static final String RECEIVED = "received";
    static final String DROPPED = "dropped";
    static final String WRITE_POSTED = "write_posted";
    static final String WRITES_ENDED = "writes_ended";
    static final String ABORTED = "aborted";
    static final String KV_READY = "kv_ready";
    static final String KV_FAILED = "kv_failed";
    static final String USES_KV = "uses_kv";
    static final String ENDED = "ended";
    static final String FREED = "freed";
    static final String OUTCOME = "outcome";
    static final String LOST = "lost";
    static final String WRITE_DONE = "write_done";
    static final String WRITE_FAILED = "write_failed";

    public HistoryEvent {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(kind, "kind");
        transfer = transfer == null ? "" : transfer;
        message = message == null ? "" : message;
        blocks = blocks == null ? List.of() : List.copyOf(blocks);
        detail = detail == null ? "" : detail;
        source = source == null ? "" : source;
    }

    /** A side's event, for tests and tools that build histories. */
    public static HistoryEvent side(long micros, String role, String kind, String transfer, long incarnation) {
        return new HistoryEvent(micros, role, kind, transfer, incarnation, "", 0, 0, List.of(), "", -1, "");
    }

    /** This event about notify message {@code message} from incarnation {@code from} about incarnation {@code to}. */
    public HistoryEvent message(String message, long from, long to) {
        return new HistoryEvent(micros, role, kind, transfer, incarnation, message, from, to, blocks, detail, index,
                source);
    }

    /** This event with {@code blocks}. */
    public HistoryEvent blocks(List<Long> blocks) {
        return new HistoryEvent(micros, role, kind, transfer, incarnation, message, from, to, blocks, detail, index,
                source);
    }

    /** This event about incarnation {@code to} of the peer. */
    public HistoryEvent to(long to) {
        return new HistoryEvent(micros, role, kind, transfer, incarnation, message, from, to, blocks, detail, index,
                source);
    }

    /** This event with {@code detail}. */
    public HistoryEvent detail(String detail) {
        return new HistoryEvent(micros, role, kind, transfer, incarnation, message, from, to, blocks, detail, index,
                source);
    }

    /** This client's outcome of request {@code index}. */
    public static HistoryEvent outcome(long micros, int index, String transfer, String outcome) {
        return new HistoryEvent(micros, "client", OUTCOME, transfer, 0, "", 0, 0, List.of(), outcome, index, "");
    }

    /** Whether it is {@code kind} of notify message {@code message}. */
    boolean is(String kind, String message) {
        return this.kind.equals(kind) && this.message.equals(message);
    }

    /** The side it happened on: role and incarnation. */
    String instance() {
        return role + "#" + incarnation;
    }

    /** One line for a report. */
    @Override
    public String toString() {
        StringBuilder line = new StringBuilder().append(micros).append(' ').append(role);
        if (incarnation != 0) {
            line.append('#').append(incarnation);
        }
        line.append(' ').append(kind);
        if (index >= 0) {
            line.append(" request ").append(index);
        }
        if (!message.isEmpty()) {
            line.append(' ').append(message).append(" from ").append(from);
        }
        if (to != 0) {
            line.append(" to ").append(to);
        }
        if (!blocks.isEmpty()) {
            line.append(" blocks ").append(blocks.size() <= 16 ? blocks.toString()
                    : blocks.subList(0, 16).stream().map(String::valueOf).collect(Collectors.joining(", ", "[", ", …]")));
        }
        if (!detail.isEmpty()) {
            line.append(" (").append(detail).append(')');
        }
        return line.toString();
    }
}
