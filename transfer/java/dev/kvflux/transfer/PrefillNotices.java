package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.net.InetSocketAddress;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the prefill side does with decode's messages: {@code abort} stops its transfer (or fences an id not seen
 * yet), {@code remote_blocks} goes to the board once its decode incarnation has been checked against the newest
 * known ({@link PeerIncarnations}), a newer incarnation fails every transfer aimed at the previous one, and in READ
 * mode decode's {@code release} lets a transfer's blocks go. Runs on
 * the notify server's event loop.
 */
final class PrefillNotices {
    private static final Logger LOG = LoggerFactory.getLogger(PrefillSide.class);

    private final PrefillSide side;
    private final PrefillRecorder recorder;
    private final SideHistory history;
    private final PrefillTransfers transfers;
    private final RemoteBlockBoard board;
    private final PeerIncarnations decodes = new PeerIncarnations();
    /** Incarnations of block lists that came before their transfer (bounded). */
    private final Map<String, Long> earlyIncarnations = Collections.synchronizedMap(
            new LinkedHashMap<>(16, 0.75f, false) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
                    return size() > RemoteBlockBoard.DEFAULT_CAPACITY;
                }
            });

    PrefillNotices(PrefillSide side, PrefillRecorder recorder, PrefillTransfers transfers, RemoteBlockBoard board) {
        this.side = side;
        this.history = side.history();
        this.recorder = recorder;
        this.transfers = transfers;
        this.board = board;
    }

    /**
     * Whether a block list that came before {@code t} was opened is from decode's current incarnation (true when
     * none came); a stale one aborts {@code t}.
     */
    boolean earlyBlockListCurrent(PrefillTransfer t) {
        Long early = earlyIncarnations.remove(t.id());
        return early == null || learned(t, early);
    }

    /**
     * The notify server's handler: {@code abort} stops a transfer (one for a transfer not seen yet fences its
     * id); {@code remote_blocks} from a decode's newer incarnation fails every transfer aimed at its previous one,
     * one from an older incarnation is dropped, and the rest go to the board.
     */
    void accept(NotifyMessage message) {
        PrefillTransfer t = transfers.get(message.transferId());
        try (LogContext.Scope _ = LogContext.open(message.transferId(), t == null ? null : t.observer().traceId())) {
            history.message(TransferHistory.Kind.RECEIVED, message, "");
            switch (message) {
                case NotifyMessage.Abort abort -> aborted(abort, t);
                case NotifyMessage.Release release -> released(release, t != null ? t
                        : transfers.awaitingRelease(release.transferId()));
                case NotifyMessage.RemoteBlocks list when list.incarnation() != 0 -> {
                    if (list.region() != null) {
                        side.sessions().described(list.incarnation(), list.region());
                    }
                    if (t == null) {
                        earlyIncarnations.put(list.transferId(), list.incarnation());
                        // the transfer may have opened since it was looked up, without seeing the entry: whoever
                        // takes the entry out learns the incarnation from it
                        PrefillTransfer opened = transfers.get(list.transferId());
                        Long early = opened == null ? null : earlyIncarnations.remove(list.transferId());
                        if (early != null && !learned(opened, early)) {
                            return;
                        }
                    } else if (!learned(t, list.incarnation())) {
                        return;
                    }
                    board.accept(list);
                }
                default -> board.accept(message);
            }
        }
    }

    private void aborted(NotifyMessage.Abort abort, PrefillTransfer t) {
        if (t == null) {
            transfers.fence(abort.transferId(), "was aborted (decode aborted it: " + LogText.escape(abort.reason()) + ")");
            recorder.record(PrefillRecorder.Event.ABORT_FOR_UNKNOWN, abort.transferId());
            LOG.debug("transfer {}: abort for a transfer prefill has not seen or has finished: {}",
                    LogText.escape(abort.transferId()), LogText.escape(abort.reason()));
            return;
        }
        if (abort.incarnation() != 0 && t.decodeIncarnation() != 0 && abort.incarnation() != t.decodeIncarnation()) {
            stale(abort.type(), t.id(), abort.incarnation(), t.decodeIncarnation());
            return;
        }
        // the reason is a peer's text: escaped, and cut so that fenced ids stay small
        side.abort(t, "decode aborted it: " + LogText.escape(abort.reason()));
    }

    /** READ mode: decode has read the transfer's blocks (its reads drained); they are freed. */
    private void released(NotifyMessage.Release release, PrefillTransfer t) {
        if (t == null) {
            LOG.debug("transfer {}: release for a transfer prefill no longer holds (late or repeated)",
                    LogText.escape(release.transferId()));
            return;
        }
        if (release.incarnation() != 0 && t.decodeIncarnation() != 0 && release.incarnation() != t.decodeIncarnation()
                || release.toIncarnation() != 0 && release.toIncarnation() != side.incarnation()) {
            stale(release.type(), t.id(), release.incarnation(), t.decodeIncarnation());
            return;
        }
        if (!t.offered()) {
            // decode releases what it read; before read_ready there is nothing of this transfer it could have read
            LOG.debug("transfer {}: release before prefill offered its KV; ignored", LogText.escape(t.id()));
            return;
        }
        if (t.consumerReleased()) {
            recorder.record(PrefillRecorder.Event.READ_RELEASED, t.id());
        }
    }

    private void stale(NotifyMessage.Type type, String id, long from, long current) {
        recorder.record(PrefillRecorder.Event.STALE_INCARNATION, id);
        history.record(TransferHistory.Kind.DROPPED, id, type.name().toLowerCase(java.util.Locale.ROOT)
                + " from decode incarnation " + from + ", not the current " + current);
        LOG.warn("transfer {}: rejected {} from decode incarnation {}, not the current {} (a message from"
                + " before a restart)", LogText.escape(id), type, from, current);
    }

    /**
     * Decode incarnation {@code incarnation} sent the transfer's block list: a newer incarnation than the one
     * known at that address means decode restarted, and every running transfer aimed at its previous incarnation
     * (or that came before the restart and has no block list yet) fails at once; an older one is dropped and
     * aborts the transfer.
     *
     * @return false if the block list is stale and must not be used
     */
    private boolean learned(PrefillTransfer t, long incarnation) {
        PeerIncarnations.Seen seen = decodes.observe(t.decode(), incarnation);
        if (seen.verdict() == PeerIncarnations.Verdict.STALE) {
            stale(NotifyMessage.Type.REMOTE_BLOCKS, t.id(), incarnation, seen.previous());
            side.abort(t, "its block list came from a previous incarnation of decode " + LogText.hostPort(t.decode()));
            return false;
        }
        t.decodeIncarnation(incarnation);
        if (seen.verdict() == PeerIncarnations.Verdict.RESTARTED) {
            decodeRestarted(t.decode(), seen.previous(), incarnation);
        }
        return true;
    }

    private void decodeRestarted(InetSocketAddress decode, long previous, long current) {
        long startedAt = Incarnation.startMillis(current);
        int failed = 0;
        for (PrefillTransfer other : transfers.running()) {
            if (!other.decode().equals(decode)) {
                continue;
            }
            boolean old = other.decodeIncarnation() != 0 ? other.decodeIncarnation() < current
                    : other.arrivalMillis() < startedAt;
            if (old) {
                other.noReleaseToDecode();
                if (side.abort(other, "decode " + LogText.hostPort(decode) + " restarted (incarnation " + previous + " -> "
                        + current + "); its previous incarnation's blocks are gone")) {
                    recorder.record(PrefillRecorder.Event.FAILED_ON_DECODE_RESTART, other.id());
                    failed++;
                }
            }
        }
        LOG.warn("decode {} restarted (incarnation {} -> {}): failed {} transfers aimed at its previous"
                + " incarnation and freed their blocks", LogText.hostPort(decode), previous, current, failed);
    }
}
