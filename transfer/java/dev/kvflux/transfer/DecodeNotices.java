package dev.kvflux.transfer;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.scheduler.Schedulers;

/**
 * What the decode side does with prefill's messages: a message about another decode incarnation's blocks, or from
 * an older prefill incarnation ({@link PeerIncarnations}), is dropped and counted; a newer prefill incarnation
 * fails every transfer waiting on the previous one; {@code write_done}'s content check is verified;
 * {@code release} frees or unquarantines blocks (or is remembered until its transfer is opened); the rest settles
 * the expected transfers. Runs on the notify server's event loop.
 */
final class DecodeNotices {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeSide.class);

    private final long incarnation;
    private final ContentCheck contentCheck;
    private final DecodeRecorder recorder;
    private final Map<String, DecodeTransfer> active;
    private final ExpectedTransfers expected;
    private final BlockAllocator blocks;
    private final EarlyReleases earlyReleases;
    private final PeerIncarnations prefills = new PeerIncarnations();
    /** READ mode: the sessions into prefills' memory, told where each prefill's KV lives; null in WRITE mode. */
    private final DecodeSessions readSessions;
    private final SideHistory history;

    DecodeNotices(long incarnation, ContentCheck contentCheck, DecodeRecorder recorder,
            Map<String, DecodeTransfer> active, ExpectedTransfers expected, BlockAllocator blocks,
            EarlyReleases earlyReleases, DecodeSessions readSessions, SideHistory history) {
        this.history = history;
        this.readSessions = readSessions;
        this.incarnation = incarnation;
        this.contentCheck = contentCheck;
        this.recorder = recorder;
        this.active = active;
        this.expected = expected;
        this.blocks = blocks;
        this.earlyReleases = earlyReleases;
    }

    /**
     * The notify server's handler: a message from prefill about another incarnation's blocks, or from an older
     * prefill incarnation, is dropped and counted; {@code release} frees or unquarantines blocks; the rest is for
     * the expected transfers.
     */
    void accept(NotifyMessage message) {
        DecodeTransfer t = active.get(message.transferId());
        try (LogContext.Scope _ = LogContext.open(message.transferId(), t == null ? null : t.observer().traceId())) {
            if (t != null) {
                t.observer().notice(message);
            }
            handle(message, t);
        }
    }

    private void handle(NotifyMessage message, DecodeTransfer t) {
        long to = SideHistory.toIncarnation(message);
        if (to != 0 && to != incarnation) {
            history.message(TransferHistory.Kind.DROPPED, message, "about another decode incarnation's blocks");
            recorder.record(DecodeRecorder.Event.STALE_INCARNATION, message.transferId());
            LOG.warn("transfer {}: rejected {} about blocks of decode incarnation {}, not this one ({}): it was"
                    + " meant for this decode before a restart", LogText.escape(message.transferId()), message.type(),
                    to, incarnation);
            return;
        }
        if (message.incarnation() != 0 && t != null && !fromCurrentPrefill(message, t)) {
            history.message(TransferHistory.Kind.DROPPED, message, "from an older prefill incarnation");
            return;
        }
        history.message(TransferHistory.Kind.RECEIVED, message, "");
        switch (message) {
            case NotifyMessage.WriteDone done when done.checksum() != 0 && t != null
                    && contentCheck != ContentCheck.NONE -> {
                if (contentCheck.blocking()) {
                    Schedulers.boundedElastic().schedule(() -> verified(done, t));
                } else {
                    verified(done, t);
                }
            }
            case NotifyMessage.Release release -> released(release.transferId());
            case NotifyMessage.ReadReady ready -> readable(ready, t);
            default -> expected.accept(message);
        }
    }

    /** READ mode: prefill's KV is computed; the transfer waiting for it reads it from where it says. */
    private void readable(NotifyMessage.ReadReady ready, DecodeTransfer t) {
        if (t != null && t.readReady() != null) {
            LOG.debug("transfer {}: a repeated read_ready, dropped (its reads run already)",
                    LogText.escape(ready.transferId()));
            return;
        }
        if (t == null || readSessions == null) {
            // a transfer that ended before its read_ready came told prefill abort, which frees prefill's blocks
            LOG.debug("transfer {}: read_ready for a transfer nobody here reads (ended, or unknown); dropped",
                    LogText.escape(ready.transferId()));
            return;
        }
        if (ready.region() != null) {
            readSessions.described(ready.incarnation(), ready.region());
        }
        t.readReady(ready);
        expected.accept(new NotifyMessage.WriteDone(ready.transferId(), ready.incarnation(), ready.toIncarnation(), 0));
    }

    private void verified(NotifyMessage.WriteDone done, DecodeTransfer t) {
        String reason;
        try {
            long expectedSum = contentCheck.of(t.id(), t.blocks());
            if (expectedSum == done.checksum()) {
                recorder.record(DecodeRecorder.Event.KV_VERIFIED, t.id());
                expected.accept(done);
                return;
            }
            if (t.waitOver()) {
                // The wait ended first (its receive deadline, a cancel), which freed the blocks: they may hold
                // another transfer's KV by now, so the mismatch says nothing about this write, and nothing is
                // decoded from them. A decode frozen past its deadline sees this when it runs again.
                LOG.info("transfer {}: write_done came as its wait had ended; the content check ran over blocks that"
                        + " were freed meanwhile, so its mismatch is not counted", LogText.escape(t.id()));
                return;
            }
            LOG.error("transfer {}: KV content check failed (prefill's check {} over the blocks it wrote, {} expected"
                    + " over decode's blocks); the request fails instead of decoding from wrong KV",
                    LogText.escape(t.id()), Long.toHexString(done.checksum()), Long.toHexString(expectedSum));
            reason = "KV content check failed: the KV prefill wrote does not match the blocks decode granted for"
                    + " this transfer; not decoding from it";
        } catch (RuntimeException e) {
            // the check could not read the KV (a GPU error): the KV is not known to be right, so it is not decoded
            LOG.error("transfer {}: the KV content check could not run: {}", LogText.escape(t.id()), e.toString());
            reason = "KV content check could not read the KV (" + e.getMessage() + "); not decoding from it";
        }
        recorder.record(DecodeRecorder.Event.KV_CORRUPT, t.id());
        // prefill has said how its write ended: no abort; the wait fails as corrupt, and the registry settles the id
        t.prefillSettled(true);
        t.fail(new ReceiveFailedException(t.id(), ReceiveFailedException.Kind.CORRUPT, StatusCode.ERR_BAD_STATE,
                "prefill reported write_done for transfer " + t.id() + ", but " + reason));
        expected.accept(new NotifyMessage.WriteFailed(t.id(), StatusCode.ERR_BAD_STATE, reason));
    }

    private void released(String id) {
        boolean held;
        synchronized (earlyReleases) {
            held = blocks.release(id);
            if (!held) {
                // prefill may be done with a transfer before decode has opened it
                earlyReleases.remember(id);
            }
        }
        if (held) {
            recorder.record(DecodeRecorder.Event.RELEASE, id);
        } else {
            recorder.record(DecodeRecorder.Event.RELEASE_UNKNOWN, id);
            LOG.debug("release for transfer {}, which holds no blocks here (late, duplicate, or before its request)",
                    LogText.escape(id));
        }
    }

    /**
     * Checks a prefill message's incarnation against the newest seen from that prefill: an older one is dropped
     * and counted; a newer one means prefill restarted, and every transfer waiting on its previous incarnation
     * (opened before the restart) fails at once as {@code PREFILL_RESTARTED}.
     *
     * @return false if the message is stale and must be dropped
     */
    private boolean fromCurrentPrefill(NotifyMessage message, DecodeTransfer t) {
        PeerIncarnations.Seen seen = prefills.observe(t.prefill(), message.incarnation());
        if (seen.verdict() == PeerIncarnations.Verdict.STALE) {
            recorder.record(DecodeRecorder.Event.STALE_INCARNATION, t.id());
            LOG.warn("transfer {}: rejected {} from prefill incarnation {}, older than {} (from before a restart)",
                    LogText.escape(t.id()), message.type(), message.incarnation(), seen.previous());
            return false;
        }
        if (seen.verdict() == PeerIncarnations.Verdict.RESTARTED) {
            long startedAt = Incarnation.startMillis(message.incarnation());
            int failed = 0;
            for (DecodeTransfer other : active.values()) {
                if (other.prefill().equals(t.prefill()) && !other.prefillSettled() && other.openedMillis() < startedAt
                        && other.fail(new ReceiveFailedException(other.id(), ReceiveFailedException.Kind.PREFILL_RESTARTED,
                                null, "prefill " + LogText.hostPort(t.prefill()) + " restarted (incarnation "
                                        + seen.previous() + " -> " + message.incarnation() + ") before this request's"
                                        + " KV was written; retry the request"))) {
                    recorder.record(DecodeRecorder.Event.FAILED_ON_PREFILL_RESTART, other.id());
                    failed++;
                }
            }
            LOG.warn("prefill {} restarted (incarnation {} -> {}): failed {} requests waiting for KV from its previous"
                    + " incarnation", LogText.hostPort(t.prefill()), seen.previous(), message.incarnation(), failed);
        }
        return true;
    }
}
