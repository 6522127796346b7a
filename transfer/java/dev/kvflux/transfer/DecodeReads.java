package dev.kvflux.transfer;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.operators.TransferException;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The decode side's reads in READ mode: once prefill said {@code read_ready}, a transfer's KV is read from prefill's
 * blocks layer by layer ({@link LayerReads}), checked, and prefill released once nothing is in flight.
 */
final class DecodeReads {
    /** READ mode's settings: the sessions into prefills' memory, decode's own layout, the reads and the TP size. */
    record Settings(DecodeSessions sessions, KvLayout layout, LayerReads reads, int tpSize) {
    }

    private final Settings settings;
    private final BlockAllocator blocks;
    private final ContentCheck contentCheck;
    private final DecodeRecorder recorder;
    /** Tells prefill {@code release} for a transfer whose reads have drained. */
    private final BiConsumer<DecodeTransfer, NotifyMessage.ReadReady> release;
    /** Transfers whose reads were posted and have not settled yet (drained, or given up on at their timeout). */
    private final AtomicInteger inFlight = new AtomicInteger();

    DecodeReads(Settings settings, BlockAllocator blocks, ContentCheck contentCheck, DecodeRecorder recorder,
            BiConsumer<DecodeTransfer, NotifyMessage.ReadReady> release) {
        this.settings = settings;
        this.blocks = blocks;
        this.contentCheck = contentCheck;
        this.recorder = recorder;
        this.release = release;
    }

    /**
     * READ mode: reads the KV prefill said {@code read_ready} for, layer by layer through the side's
     * {@link LayerReads}, then checks its content; once the reads have drained, prefill is told {@code release}.
     */
    Mono<Void> read(DecodeTransfer t) {
        NotifyMessage.ReadReady ready = t.readReady();
        String id = t.id();
        if (!t.startReads()) {
            // the request ended as its read_ready came: its blocks are on their way back, so nothing is read into
            // them, and prefill is released (its end may have run before read_ready was taken)
            return notRead(t, ready, false, StatusCode.ERR_BAD_STATE, "transfer " + id
                    + " ended before decode began reading its KV");
        }
        TransferSession session;
        KvLayout remote;
        try {
            remote = settings.sessions().layout(t.prefill(), ready.incarnation());
            session = settings.sessions().session(t.prefill(), ready.incarnation());
        } catch (RuntimeException e) {
            return notRead(t, ready, false, StatusCode.ERR_BAD_STATE, "decode cannot read transfer " + id
                    + "'s KV from prefill " + LogText.hostPort(t.prefill()) + ": " + e.getMessage());
        }
        int n = Math.min(t.blocks().size(), ready.blockNotifyList().size());
        List<Long> local = t.blocks().subList(0, n);
        List<Long> theirs = ready.blockNotifyList().subList(0, n);
        List<BatchPlan> plans = new ArrayList<>(settings.layout().layers());
        long uid;
        try {
            for (int l = 0; l < settings.layout().layers(); l++) {
                plans.add(settings.layout().layerPlan(l, local, remote, theirs));
            }
        } catch (IllegalArgumentException e) {
            return notRead(t, ready, true, StatusCode.ERR_INVALID_ARGS, "prefill's read_ready for transfer " + id
                    + " names blocks decode cannot read: " + e.getMessage());
        }
        try {
            uid = session.allocateTransferUid();
        } catch (RuntimeException e) {
            return notRead(t, ready, true, StatusCode.ERR_BAD_STATE, "decode cannot read transfer " + id
                    + "'s KV from prefill " + LogText.hostPort(t.prefill()) + ": " + e.getMessage());
        }
        Runnable drained = () -> {
            t.drained();
            blocks.release(id); // nothing writes into them any more: they are freed when the request ends
            release.accept(t, ready);
        };
        // the session goes back once the reads are over, drained or stalled: nothing more is posted through it
        Runnable settled = () -> {
            settings.sessions().released(t.prefill(), ready.incarnation());
            inFlight.decrementAndGet();
        };
        return Flux.defer(() -> {
                    inFlight.incrementAndGet(); // LayerReads settles once per subscription, whichever way it ends
                    return settings.reads().read(session, plans, uid, drained, settled);
                })
                .doOnNext(t::layerRead)
                .onErrorMap(TransferException.class, e -> new ReceiveFailedException(id,
                        ReceiveFailedException.Kind.READ_FAILED, e.code(), "decode's read of transfer " + id + "'s KV"
                                + " from prefill failed: " + e.getMessage()))
                .then(Mono.defer(() -> checked(t, ready)))
                .doOnSuccess(v -> t.layersEnded(null));
    }

    /** How many transfers' reads are in flight: posted, and neither drained nor given up on at their timeout. */
    int inFlight() {
        return inFlight.get();
    }

    /**
     * The transfer fails before anything was read: nothing is in flight, so its blocks may go, the session (when
     * {@code tookSession}) goes back, and prefill is released.
     */
    private Mono<Void> notRead(DecodeTransfer t, NotifyMessage.ReadReady ready, boolean tookSession, StatusCode code,
            String reason) {
        t.drained();
        if (tookSession) {
            settings.sessions().released(t.prefill(), ready.incarnation());
        }
        release.accept(t, ready);
        return Mono.error(new ReceiveFailedException(t.id(), ReceiveFailedException.Kind.READ_FAILED, code, reason));
    }

    /** READ mode: the content check of what decode read against prefill's, when both have one. */
    private Mono<Void> checked(DecodeTransfer t, NotifyMessage.ReadReady ready) {
        ContentCheck check = contentCheck;
        if (check == ContentCheck.NONE || ready.checksum() == 0) {
            return Mono.empty();
        }
        Mono<Void> verify = Mono.fromRunnable(() -> {
            String reason;
            try {
                if (check.of(t.id(), t.blocks()) == ready.checksum()) {
                    recorder.record(DecodeRecorder.Event.KV_VERIFIED, t.id());
                    return;
                }
                reason = "the KV decode read does not match what prefill computed for this transfer";
            } catch (RuntimeException e) {
                reason = "the content check could not read the KV (" + e.getMessage() + ")";
            }
            recorder.record(DecodeRecorder.Event.KV_CORRUPT, t.id());
            throw new ReceiveFailedException(t.id(), ReceiveFailedException.Kind.CORRUPT, StatusCode.ERR_BAD_STATE,
                    "KV content check failed for transfer " + t.id() + ": " + reason + "; not decoding from it");
        });
        return check.blocking() ? verify.subscribeOn(Schedulers.boundedElastic()) : verify;
    }
}
