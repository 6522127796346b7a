package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Where a side tells what happens to each of its transfers, one {@link Event} at a time, for a checker that reads
 * the history of every side afterwards (the chaos runs' history checker). {@link #NONE} by default
 * ({@link SideSettings#history}). Called on whichever thread the event happened on, some of them while the side
 * holds a lock: an implementation must be thread-safe and quick and must never block (queue the event, or drop it).
 */
@FunctionalInterface
public interface TransferHistory {
    /** Records nothing. */
    TransferHistory NONE = event -> { };

    /** What happened; each kind names the fields it fills. */
    enum Kind {
        /** The side started: {@code detail} is its notify address. */
        STARTED,
        /** The side stopped (an orderly close). */
        STOPPED,
        /** A transfer was opened: {@code blocks} are the side's own blocks granted to it, {@code detail} the peer. */
        OPENED,
        /** A message was sent: {@code message}, {@code from}, {@code to}, and decode's block list's {@code blocks}. */
        SENT,
        /** A message was received and taken: as {@link #SENT}. */
        RECEIVED,
        /** A message was received and dropped (stale, or for another incarnation): as {@link #SENT}, with why. */
        DROPPED,
        /** Prefill's engine writes into decode's {@code blocks} of incarnation {@code to} from now on. */
        WRITE_POSTED,
        /** Prefill's writes of the transfer are terminal ({@code detail}: drained, or stalled when given up on). */
        WRITES_ENDED,
        /** Prefill's transfer was aborted ({@code detail}: why). */
        ABORTED,
        /** Decode's wait for the KV ended with it whole ({@code write_done} taken). */
        KV_READY,
        /** Decode's wait for the KV ended without it ({@code detail}: the outcome). */
        KV_FAILED,
        /** Decode took the request into its decode steps: it uses the transfer's KV. */
        USES_KV,
        /** The transfer ended, once. */
        ENDED,
        /** Decode's {@code blocks} of the transfer became free ({@code detail}: release, lease, or end). */
        FREED;

        /** The lower-case name: {@code write_posted}. */
        public String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * One event.
     *
     * @param kind what happened
     * @param transferId the transfer; empty for {@link Kind#STARTED} and {@link Kind#STOPPED}
     * @param incarnation the incarnation of the side it happened on
     * @param message the notify message's type ({@code write_done}), or null
     * @param from the incarnation the message names as its sender's (0 when none)
     * @param to the incarnation the message is about ({@code to_incarnation}; 0 when none)
     * @param blocks block ids, where the kind has them; never null
     * @param detail a peer's address, an outcome or a reason; never null
     */
    record Event(Kind kind, String transferId, long incarnation, String message, long from, long to, List<Long> blocks,
            String detail) {
        public Event {
            Objects.requireNonNull(kind, "kind");
            transferId = transferId == null ? "" : transferId;
            blocks = blocks == null ? List.of() : List.copyOf(blocks);
            detail = detail == null ? "" : detail;
        }

        /** An event with no message, blocks or detail. */
        public static Event of(Kind kind, String transferId, long incarnation) {
            return new Event(kind, transferId, incarnation, null, 0, 0, List.of(), "");
        }

        /** {@code kind} ({@link Kind#SENT}, {@link Kind#RECEIVED}, {@link Kind#DROPPED}) of {@code message}. */
        public static Event of(Kind kind, NotifyMessage message, long incarnation, String detail) {
            long to = SideHistory.toIncarnation(message);
            List<Long> blocks = message instanceof NotifyMessage.RemoteBlocks list ? list.blockNotifyList() : List.of();
            return new Event(kind, message.transferId(), incarnation, message.type().name().toLowerCase(Locale.ROOT),
                    message.incarnation(), to, blocks, detail);
        }

        /** This event with {@code blocks}. */
        public Event withBlocks(List<Long> blocks) {
            return new Event(kind, transferId, incarnation, message, from, to, blocks, detail);
        }

        /** This event with {@code detail}. */
        public Event withDetail(String detail) {
            return new Event(kind, transferId, incarnation, message, from, to, blocks, detail);
        }

        /** This event about incarnation {@code to} of the peer. */
        public Event withTo(long to) {
            return new Event(kind, transferId, incarnation, message, from, to, blocks, detail);
        }
    }

    /** {@code event} happened. */
    void record(Event event);
}
