package dev.kvflux.transfer;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.pipeline.LayerWrite;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WriteRequest;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import dev.kvflux.operators.Polls;
import java.util.concurrent.TimeoutException;

/**
 * The prefill side's writes, from a transfer's first layer to its release: wait for decode's block list, post the
 * layers through the WRITE pipeline, send the outcome, drain what was posted, free the source blocks, say
 * {@code release}. Shared state lives in {@link PrefillTransfers} and {@link BlockAllocator}, both thread-safe.
 */
final class PrefillWrites {
    private static final Logger LOG = LoggerFactory.getLogger(PrefillSide.class);

    private final PrefillSide.Settings settings;
    private final NotifyClient client;
    private final BlockAllocator blocks;
    private final PrefillTransfers transfers;
    private final RemoteBlockBoard board;
    private final Disposable.Composite running = Disposables.composite();
    /** Transfers ended whose drain, free and release are still to come. */
    private final AtomicInteger settling = new AtomicInteger();
    /** Messages to decode still being sent (write_done, write_failed, release). */
    private final AtomicInteger sending = new AtomicInteger();

    PrefillWrites(PrefillSide.Settings settings, NotifyClient client, BlockAllocator blocks,
            PrefillTransfers transfers, RemoteBlockBoard board) {
        this.settings = settings;
        this.client = client;
        this.blocks = blocks;
        this.transfers = transfers;
        this.board = board;
    }

    /** Starts {@code t}'s write unless it was aborted or ended first. */
    void write(PrefillTransfer t, List<? extends LayerEvent> events) {
        try (LogContext.Scope _ = LogContext.open(t.id(), t.observer().traceId())) {
            if (!t.startWriting()) {
                return;
            }
            t.observer().writing();
            String id = t.id();
            blocks.writing(id);
            int layers = settings.layout().layers();
            Duration left = Duration.ofNanos(Math.max(1_000_000, t.deadlineNanos() - settings.clock().nanos()));
            AtomicInteger posted = new AtomicInteger();
            Runnable afterPost = () -> {
                if (posted.incrementAndGet() == layers) {
                    t.observer().posted();
                }
            };
            if (settings.mode() == KvMode.READ) {
                offer(t, events, left);
                return;
            }
            // the write takes one of the pipeline's places only once decode's block list is here: a transfer whose
            // decode never answers holds no place others could write with
            Mono<WriteOutcome> outcome = blockList(t, left)
                    .flatMap(remoteBlocks -> {
                        List<Long> local = t.localBlocks();
                        t.decodeBlocks(remoteBlocks.subList(0, Math.min(local.size(), remoteBlocks.size())));
                        KvLayout remote;
                        try {
                            remote = settings.sessions().layout(t.decode(), t.decodeIncarnation());
                        } catch (RuntimeException e) {
                            return Mono.error(new TransferException(StatusCode.ERR_BAD_STATE, e.getMessage()));
                        }
                        Flux<LayerWrite> layerWrites = Flux.range(0, layers).map(l -> new LayerWrite(l, events.get(l),
                                settings.layout().layerPlan(l, local, remote, remoteBlocks)));
                        // said at the first post, not here: a transfer aborted in between posts nothing
                        Runnable firstPost = () -> settings.history().blocks(TransferHistory.Kind.WRITE_POSTED, id,
                                t.decodeBlocks(), t.decodeIncarnation());
                        return settings.pipeline().write(new WriteRequest(id, t.recording(session(t),
                                settings.clock()::nanos, firstPost, afterPost), layerWrites));
                    })
                    .onErrorResume(TransferException.class, e -> Mono.just(new WriteOutcome.WriteFailed(id, e.code(),
                            e.reason())));
            track(t, outcome, result -> {
                finish(result, t);
                settle(t);
            });
        }
    }

    /** Decode's block list for {@code t}, or ERR_BAD_STATE if it has not come within {@code left}. */
    private Mono<List<Long>> blockList(PrefillTransfer t, Duration left) {
        String id = t.id();
        return board.blocks(id)
                .timeout(left, Mono.error(() -> new TransferException(StatusCode.ERR_BAD_STATE, "decode's block"
                        + " list for " + id + " did not arrive by the transfer's deadline ("
                        + DurationText.of(settings.decodeDeadline()) + " after it was opened, when decode gives"
                        + " up); decode is gone, slow, or cannot reach prefill's notify port")),
                        settings.clock().scheduler())
                // after the timeout: a list that lost the race to it is not told
                .doOnNext(blocks -> t.observer().blockListReceived());
    }

    /** Runs {@code work} for {@code t}, stoppable by an abort and by {@link #dispose}, then {@code then} its result. */
    private <T> void track(PrefillTransfer t, Mono<T> work, java.util.function.Consumer<T> then) {
        Disposable[] self = new Disposable[1];
        self[0] = work
                .doFinally(signal -> {
                    if (self[0] != null) {
                        running.remove(self[0]);
                    }
                })
                .contextWrite(LogContext.context(t.id(), t.observer().traceId()))
                .subscribe(result -> {
                    try (LogContext.Scope _ = LogContext.open(t.id(), t.observer().traceId())) {
                        then.accept(result);
                    }
                });
        if (!self[0].isDisposed()) {
            running.add(self[0]);
            t.running(self[0]);
        }
    }

    /**
     * READ mode: once decode's block list is here (it says which decode incarnation wants the KV) and every layer's
     * event is ready, decode is told {@code read_ready} with prefill's blocks; the transfer then holds its blocks
     * until decode's {@code release} (its reads have drained), an abort, or the read lease, and settles.
     */
    private void offer(PrefillTransfer t, List<? extends LayerEvent> events, Duration left) {
        String id = t.id();
        Duration eventTimeout = settings.transferTimeout();
        Mono<WriteOutcome> outcome = blockList(t, left)
                .flatMap(remoteBlocks -> {
                    t.decodeBlocks(remoteBlocks.subList(0, Math.min(t.localBlocks().size(), remoteBlocks.size())));
                    return Flux.range(0, events.size())
                            .concatMap(l -> Polls.layerReady(events.get(l), Polls.DEFAULT_EVENT_POLL, eventTimeout,
                                            settings.clock().scheduler())
                                    .onErrorMap(e -> new TransferException(StatusCode.ERR_GPU_OP, "layer " + l
                                            + "'s event " + (e.getCause() instanceof TimeoutException ? "was not"
                                            + " ready after " + DurationText.of(eventTimeout) : "failed: "
                                            + e.getMessage()))))
                            .then(Mono.fromCallable(() -> (WriteOutcome) new WriteOutcome.WriteDone(id)));
                })
                .onErrorResume(TransferException.class, e -> Mono.just(new WriteOutcome.WriteFailed(id, e.code(),
                        e.reason())));
        track(t, outcome
                .flatMap(result -> {
                    t.observer().posted();
                    try (LogContext.Scope _ = LogContext.open(id, t.observer().traceId())) {
                        if (result instanceof WriteOutcome.WriteFailed) {
                            finish(result, t);
                            return Mono.just(true);
                        }
                        if (!t.offer(settings.clock().nanos())) {
                            // aborted as its last event turned ready: its blocks may be free already, so decode
                            // is offered nothing to read
                            return Mono.just(false);
                        }
                        t.observer().written(result);
                        settings.recorder().written(result, Duration.ofNanos(settings.clock().nanos() - t.openedNanos()));
                        t.outcome(result);
                        long check = settings.contentCheck().of(id, t.decodeBlocks());
                        NotifyMessage ready = new NotifyMessage.ReadReady(id, t.localBlocks(), settings.incarnation(),
                                t.decodeIncarnation(), check, settings.region());
                        sendOutcome(t, ready);
                    }
                    // decode reads from these blocks until it says release; its lease bounds how long they are held
                    return t.whenConsumerReleased().thenReturn(true)
                            .timeout(settings.readLease(), Mono.fromCallable(() -> {
                                settings.recorder().record(PrefillRecorder.Event.READ_LEASE_EXPIRED, id);
                                try (LogContext.Scope _ = LogContext.open(id, t.observer().traceId())) {
                                    LOG.warn("transfer {}: decode did not release prefill's blocks within the read"
                                            + " lease of {}; freed them (decode is gone or unreachable)",
                                            LogText.escape(id), DurationText.of(settings.readLease()));
                                }
                                return false;
                            }), settings.clock().scheduler());
                }), held -> settle(t));
    }

    /**
     * The session the transfer's layers go through: asked of the side's {@link DecodeSessions} when the first
     * layer is posted, once decode's block list (and with it decode's incarnation) has come.
     */
    private TransferSession session(PrefillTransfer t) {
        return new LazySession(() -> {
            TransferSession session = settings.sessions().session(t.decode(), t.decodeIncarnation());
            t.sessionTaken();
            return session;
        });
    }

    private void finish(WriteOutcome outcome, PrefillTransfer t) {
        if (outcome instanceof WriteOutcome.WriteDone) {
            copied(t);
        }
        t.observer().written(outcome);
        settings.recorder().written(outcome, Duration.ofNanos(settings.clock().nanos() - t.openedNanos()));
        if (outcome instanceof WriteOutcome.WriteFailed failed) {
            LOG.warn("transfer {}: MoRIIO batch wait failed ({}): {}{}", LogText.escape(failed.transferId()),
                    failed.code().qualifiedName(), failed.reason(),
                    settings.failureNotices() ? "" : "; decode is not told (failure notices are off)");
            if (!settings.failureNotices()) {
                settings.recorder().record(PrefillRecorder.Event.FAILURE_NOT_NOTIFIED, t.id());
                t.outcome(outcome);
                return;
            }
        }
        long check = outcome instanceof WriteOutcome.WriteDone
                ? settings.contentCheck().of(t.id(), t.decodeBlocks()) : 0;
        t.outcome(outcome);
        sendOutcome(t, NotifyMessage.of(outcome, settings.incarnation(), t.decodeIncarnation(), check));
    }

    /** Tells the observer when the write's copies ended and what they moved, when the engine can tell. */
    private void copied(PrefillTransfer t) {
        long since = TransferStatus.sinceLastCopyEnd(t.posted());
        if (since < 0) {
            return;
        }
        long span = settings.clock().nanos() - since - t.firstPostNanos();
        t.observer().copied(t.postedBytes(), Duration.ofNanos(Math.max(0, span)), Duration.ofNanos(since));
    }

    /**
     * Ends the transfer once: waits until nothing it posted is in flight (the drain, bounded by the transfer
     * timeout), frees its source blocks and sends decode {@code release}. When copies are still in flight at the
     * timeout (they stalled), the source blocks are freed anyway, counted, and decode is sent no release: its
     * lease reclaims its blocks.
     */
    void settle(PrefillTransfer t) {
        List<TransferStatus> posted = t.end();
        if (posted == null) {
            return;
        }
        String reason = t.abortReason();
        // READ mode: decode may still read offered blocks; its release is taken after the end too
        boolean read = settings.mode() == KvMode.READ && t.offered();
        if (read) {
            transfers.awaitRelease(t);
        }
        transfers.closed(t, reason != null ? "was aborted (" + reason + ")" : "has already finished");
        t.observer().ended();
        settings.history().record(TransferHistory.Kind.ENDED, t.id(), reason == null ? "" : "aborted");
        settling.incrementAndGet();
        Duration timeout = settings.transferTimeout();
        CompletionWait.drain(timeout).await(posted)
                .then(read ? readersDone(t) : Mono.empty())
                .then(Mono.fromRunnable(() -> released(t)))
                .onErrorResume(e -> {
                    // a failure wins over the timeout in the drain's error, so ask the statuses themselves
                    if (e instanceof TransferException te && te.code() == StatusCode.IN_PROGRESS
                            || Statuses.inFlight(posted)) {
                        settings.recorder().record(PrefillRecorder.Event.STALLED_AT_RELEASE, t.id());
                        settings.history().record(TransferHistory.Kind.WRITES_ENDED, t.id(), "stalled");
                        blocks.forceFree(t.id());
                        try (LogContext.Scope _ = LogContext.open(t.id(), t.observer().traceId())) {
                            LOG.warn("transfer {}: copies still in flight {} after it ended; its source blocks are"
                                    + " freed anyway and decode is sent no release (its lease reclaims its blocks)",
                                    LogText.escape(t.id()), DurationText.of(timeout));
                        }
                    } else {
                        released(t);
                    }
                    return Mono.empty();
                })
                .doFinally(signal -> {
                    Statuses.close(posted);
                    if (t.tookSession()) {
                        settings.sessions().released(t.decode(), t.decodeIncarnation());
                    }
                    settling.decrementAndGet();
                })
                .contextWrite(LogContext.context(t.id(), t.observer().traceId()))
                .subscribe();
    }

    /**
     * READ mode, blocks offered: until decode releases them (at once if it has) or the read lease since the offer
     * runs out. An abort does not free blocks decode may be reading.
     */
    private Mono<Void> readersDone(PrefillTransfer t) {
        long left = settings.readLease().toNanos() - (settings.clock().nanos() - t.offeredNanos());
        Mono<Void> released = left <= 0 ? Mono.empty() : t.whenConsumerReleased()
                .timeout(Duration.ofNanos(left), Mono.empty(), settings.clock().scheduler());
        return released.doFinally(signal -> transfers.releasedOrLapsed(t));
    }

    private void released(PrefillTransfer t) {
        // before the release: decode may hand the blocks on once it has it
        settings.history().record(TransferHistory.Kind.WRITES_ENDED, t.id(), "drained");
        blocks.free(t.id());
        // in READ mode nothing was written into decode's blocks: decode frees them itself and takes no release
        if (t.releaseDecode() && settings.mode() == KvMode.WRITE) {
            settings.recorder().record(PrefillRecorder.Event.RELEASE_SENT, t.id());
            send(t, new NotifyMessage.Release(t.id(), settings.incarnation(), t.decodeIncarnation()), delivered -> { });
        }
    }

    /** Sends the transfer's outcome, carrying the traceparent its observer gives. */
    private void sendOutcome(PrefillTransfer t, NotifyMessage outcome) {
        String traceparent = t.observer().outcomeSending();
        send(t, outcome.withTraceparent(traceparent), t.observer()::outcomeSent);
    }

    /** Sends a message about {@code t} to its decode, counted in {@link #sending} until acknowledged or given up. */
    private void send(PrefillTransfer t, NotifyMessage message, java.util.function.Consumer<Boolean> sent) {
        sending.incrementAndGet();
        settings.history().message(TransferHistory.Kind.SENT, message, "");
        client.send(t.decode(), message, settings.notifyWithin())
                .doOnNext(sent)
                .doOnError(e -> sent.accept(false))
                .doFinally(signal -> sending.decrementAndGet())
                .contextWrite(LogContext.context(t.id(), t.observer().traceId()))
                .subscribe();
    }

    /**
     * Stops every running transfer with {@code reason}: each is told {@code write_failed} ({@code ERR_BAD_STATE})
     * and settled.
     *
     * @return how many were stopped
     */
    int stopAll(String reason) {
        int stopped = 0;
        for (PrefillTransfer t : transfers.running()) {
            String why = "transfer " + t.id() + ": " + reason;
            WriteOutcome.WriteFailed failed = new WriteOutcome.WriteFailed(t.id(), StatusCode.ERR_BAD_STATE, why);
            t.outcome(failed);
            if (t.markAborted(why)) {
                stopped++;
                settings.recorder().written(failed, Duration.ofNanos(settings.clock().nanos() - t.openedNanos()));
                sendOutcome(t, new NotifyMessage.WriteFailed(t.id(), StatusCode.ERR_BAD_STATE, why,
                        settings.incarnation(), t.decodeIncarnation()));
                settle(t);
            }
        }
        return stopped;
    }

    /** Whether no drain, free, release or outcome is still to come. */
    boolean idle() {
        return settling.get() == 0 && sending.get() == 0;
    }

    /** Messages to decode not yet acknowledged or given up. */
    int sending() {
        return sending.get();
    }

    /** Cancels the writes still running. */
    void dispose() {
        running.dispose();
    }

    /** Waits on the calling thread, in 5 ms steps, until {@code done} or {@code within} has passed. */
    void waitUntil(BooleanSupplier done, Duration within) {
        long until = System.nanoTime() + within.toNanos();
        while (!done.getAsBoolean() && System.nanoTime() - until < 0) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
