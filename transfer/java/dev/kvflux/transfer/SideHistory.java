package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.net.InetSocketAddress;
import java.util.List;

/**
 * One side's {@link TransferHistory}, stamped with the side's incarnation: one call per event. With
 * {@link TransferHistory#NONE} (the default) every call returns at once, building no event.
 */
record SideHistory(TransferHistory history, long incarnation) {
    private boolean off() {
        return history == TransferHistory.NONE;
    }

    /** The side listens at {@code notify}. */
    void started(InetSocketAddress notify) {
        if (off()) {
            return;
        }
        history.record(event(TransferHistory.Kind.STARTED, "").withDetail(LogText.hostPort(notify)));
    }

    /** {@code id} was opened with the side's {@code blocks}, towards {@code peer}. */
    void opened(String id, List<Long> blocks, InetSocketAddress peer) {
        if (off()) {
            return;
        }
        history.record(event(TransferHistory.Kind.OPENED, id).withBlocks(blocks).withDetail(LogText.hostPort(peer)));
    }

    /** {@code kind} ({@code SENT}, {@code RECEIVED}, {@code DROPPED}) of {@code message}, {@code why}. */
    void message(TransferHistory.Kind kind, NotifyMessage message, String why) {
        if (off()) {
            return;
        }
        history.record(TransferHistory.Event.of(kind, message, incarnation, why));
    }

    /** Records each owner's blocks of {@code blocks} as they become free, unless nothing is recorded. */
    void freesOf(BlockAllocator blocks) {
        if (!off()) {
            blocks.onFree((owner, freed) -> this.blocks(TransferHistory.Kind.FREED, owner, freed, 0));
        }
    }

    /** {@code message}, recorded as sent. */
    NotifyMessage sent(NotifyMessage message) {
        message(TransferHistory.Kind.SENT, message, "");
        return message;
    }

    /** Decode's wait for {@code id}'s KV ended with {@code outcome}. */
    void kvWaitEnded(String id, DecodeRecorder.WaitOutcome outcome) {
        record(outcome == DecodeRecorder.WaitOutcome.WRITE_DONE ? TransferHistory.Kind.KV_READY
                : TransferHistory.Kind.KV_FAILED, id, outcome.tag());
    }

    /** {@code kind} happened to {@code id} ({@code detail} may be empty). */
    void record(TransferHistory.Kind kind, String id, String detail) {
        if (off()) {
            return;
        }
        history.record(event(kind, id).withDetail(detail));
    }

    /** {@code kind} happened to {@code id}'s {@code blocks} (of the peer's incarnation {@code to}, or 0). */
    void blocks(TransferHistory.Kind kind, String id, List<Long> blocks, long to) {
        if (off()) {
            return;
        }
        history.record(event(kind, id).withBlocks(blocks).withTo(to));
    }

    /** The incarnation whose blocks {@code message} is about ({@code to_incarnation}); 0 when it names none. */
    static long toIncarnation(NotifyMessage message) {
        return switch (message) {
            case NotifyMessage.WriteDone done -> done.toIncarnation();
            case NotifyMessage.WriteFailed failed -> failed.toIncarnation();
            case NotifyMessage.Release release -> release.toIncarnation();
            case NotifyMessage.ReadReady ready -> ready.toIncarnation();
            default -> 0;
        };
    }

    private TransferHistory.Event event(TransferHistory.Kind kind, String id) {
        return TransferHistory.Event.of(kind, id, incarnation);
    }
}
