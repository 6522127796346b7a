package dev.kvflux.transfer;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The decode side of KV transfers: it allocates each transfer's blocks, sends prefill the block list
 * ({@code remote_blocks}), expects prefill's outcome within a receive deadline, tells prefill {@code abort} when a
 * transfer ends before prefill said how its write ended (its deadline passed, its client went away, decode shuts
 * down), and keeps an ended transfer's blocks QUARANTINED until prefill's {@code release} or the block lease.
 * {@link DecodeTransfer} lists every way a transfer's wait ends.
 *
 * <p>Safety rules it keeps: a message about another incarnation's blocks ({@code to_incarnation}) is dropped;
 * prefill's incarnations are tracked per address ({@link PeerIncarnations}): a message from an older one is
 * dropped, and a newer one fails every transfer waiting on the previous one at once; {@code write_done}'s content
 * check is verified against the granted blocks; a {@code release} that comes before its transfer is remembered
 * (bounded) and frees the blocks when the transfer ends; notices for transfers nobody expects yet are kept within
 * the peer budget ({@link NotifyLimits#peerBudgetBytes()}). The notify server takes only {@code write_done},
 * {@code write_failed} and {@code release}.
 *
 * <p>Threads and time: notices are handled on the notify server's event loop; the receive deadline, the lease, the
 * reaper that frees blocks at it and the notify client's retries run on the {@linkplain Builder#scheduler
 * scheduler} (default {@code Schedulers.parallel()}) and keep its time; {@link #close()} blocks up to 2 s for the
 * reads in flight and the aborts it sends.
 */
public final class DecodeSide implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeSide.class);
    /** KV blocks by default. */
    public static final int DEFAULT_BLOCKS = 1 << 16;
    /** How long blocks whose prefill never said release stay quarantined by default: 2 × the default transfer timeout. */
    public static final Duration DEFAULT_BLOCK_LEASE = Duration.ofSeconds(60);
    /** The most releases kept for transfers decode has not opened yet. */
    private static final int EARLY_RELEASES = 4096;
    /** How long close() waits for the aborts it sends to prefill. */
    private static final Duration ABORTS_ON_CLOSE_WITHIN = Duration.ofSeconds(2);
    /** How long remote_blocks is retried without a receive deadline (as long as prefill's defer timeout). */
    private static final Duration NO_DEADLINE_BLOCKS_WITHIN = Duration.ofSeconds(60);
    private static final String SHUTTING_DOWN = "decode is shutting down; the request's KV is no longer waited for;"
            + " retry on another decode instance";

    private final Settings settings;
    private final NotifyServer notify;
    private final NotifyClient client;
    private final DecodeSends sends;
    private final ExpectedTransfers expected;
    private final BlockAllocator blocks;
    private final EarlyReleases earlyReleases;
    private final Map<String, DecodeTransfer> active = new ConcurrentHashMap<>();
    private final Disposable reaper;
    /** READ mode's reads; null in WRITE mode. */
    private final DecodeReads reads;
    private volatile boolean closing;

    private DecodeSide(Settings settings, NotifyClient client, ExpectedTransfers expected, BlockAllocator blocks,
            NotifyServer.Builder server) {
        this.settings = settings;
        this.client = client;
        this.sends = new DecodeSends(client, settings.recorder, settings.blocksWithin(), settings.history);
        this.expected = expected;
        this.blocks = blocks;
        this.reads = settings.reads == null ? null : new DecodeReads(settings.reads, blocks, settings.contentCheck,
                settings.recorder, (t, ready) -> sendRelease(t, ready.incarnation()));
        this.earlyReleases = new EarlyReleases(EARLY_RELEASES, settings.blockLease.toNanos(), settings.clock::nanos);
        DecodeNotices notices = new DecodeNotices(settings.incarnation, settings.contentCheck, settings.recorder,
                active, expected, blocks, earlyReleases, settings.reads == null ? null : settings.reads.sessions(),
                settings.history);
        settings.history.freesOf(blocks);
        this.notify = server.handler(notices::accept).bindNow();
        settings.history.started(notify.address());
        Duration eighth = settings.blockLease.dividedBy(8);
        Duration reapEvery = eighth.compareTo(Duration.ofSeconds(1)) > 0 ? Duration.ofSeconds(1)
                : eighth.isZero() ? Duration.ofMillis(1) : eighth;
        this.reaper = Flux.interval(reapEvery, settings.clock.scheduler()).subscribe(tick -> reap());
    }

    /** A decode side's settings; {@link Builder#bindNow()} starts one. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The default receive deadline for a transfer timeout: the timeout plus half of it, and at least 5 s more.
     * Decode's clock starts when it gets the request, before prefill has run the prompt, so the margin must cover
     * prefill's queue as well; prefill's own {@code write_failed} then arrives first.
     */
    public static Duration defaultReceiveDeadline(Duration transferTimeout) {
        Duration margin = transferTimeout.dividedBy(2);
        return transferTimeout.plus(margin.compareTo(Duration.ofSeconds(5)) < 0 ? Duration.ofSeconds(5) : margin);
    }

    /**
     * Opens a transfer whose KV comes from the prefill at notify address {@code prefill}, granting it
     * {@code blockCount} blocks. Wait for its KV with {@link DecodeTransfer#kv()}; {@link DecodeTransfer#close()}
     * it when the request ends, whatever way.
     *
     * @throws TransferRefusedException with nothing held: it needs more blocks than one transfer may hold
     *     ({@code TOO_LARGE}), too few blocks are free ({@code OUT_OF_BLOCKS}) or decode is shutting down
     *     ({@code SHUTTING_DOWN}), in each case after telling prefill {@code abort}; the id is already running here
     *     ({@code DUPLICATE})
     * @throws IllegalArgumentException if {@code blockCount} is under 1
     */
    public DecodeTransfer open(String transferId, InetSocketAddress prefill, int blockCount,
            DecodeTransfer.Observer observer) {
        Objects.requireNonNull(transferId, "transferId");
        Objects.requireNonNull(prefill, "prefill");
        Objects.requireNonNull(observer, "observer");
        if (closing) {
            settings.recorder.record(DecodeRecorder.Event.REFUSED_SHUTTING_DOWN, transferId);
            sends.abort(transferId, observer.traceId(), prefill, "decode is shutting down");
            throw new TransferRefusedException(TransferRefusedException.Reason.SHUTTING_DOWN, SHUTTING_DOWN);
        }
        if (blockCount > settings.maxBlocksPerTransfer) {
            settings.recorder.record(DecodeRecorder.Event.REFUSED_OUT_OF_BLOCKS, transferId);
            sends.abort(transferId, observer.traceId(), prefill, "decode refused it: it needs more blocks than one"
                    + " transfer may hold");
            throw new TransferRefusedException(TransferRefusedException.Reason.TOO_LARGE, "transfer " + transferId
                    + " needs " + blockCount + " KV blocks, more than the " + settings.maxBlocksPerTransfer
                    + " one transfer may hold on decode; shorten the prompt");
        }
        List<Long> granted;
        try {
            synchronized (earlyReleases) {
                granted = blocks.allocate(transferId, blockCount);
                if (earlyReleases.take(transferId)) {
                    blocks.release(transferId); // prefill is already done with it: free the blocks when it ends
                    settings.recorder.record(DecodeRecorder.Event.RELEASE_BEFORE_REQUEST, transferId);
                }
            }
        } catch (BlockAllocator.OutOfBlocksException e) {
            settings.recorder.record(DecodeRecorder.Event.REFUSED_OUT_OF_BLOCKS, transferId);
            sends.abort(transferId, observer.traceId(), prefill, "decode is out of KV blocks");
            throw new TransferRefusedException(TransferRefusedException.Reason.OUT_OF_BLOCKS, e.getMessage());
        } catch (IllegalStateException e) {
            throw new TransferRefusedException(TransferRefusedException.Reason.DUPLICATE, "transfer " + transferId
                    + " is already running here; every request needs its own transfer id");
        }
        DecodeTransfer t = new DecodeTransfer(this, transferId, prefill, granted, observer, settings.clock.nanos());
        settings.history.opened(transferId, granted, prefill);
        active.put(transferId, t);
        return t;
    }

    /**
     * One transfer from open to close, the Reactor way: opens it ({@link #open}), waits for its KV, then emits what
     * {@code decodeFrom} makes of it, and closes the transfer when that ends, whichever way (done, failed, or
     * cancelled by the subscriber). A refusal at open is the {@code Flux}'s error, as a failed wait is.
     */
    public <T> Flux<T> receive(String transferId, InetSocketAddress prefill, int blockCount,
            DecodeTransfer.Observer observer, java.util.function.Function<DecodeTransfer, Publisher<T>> decodeFrom) {
        Objects.requireNonNull(decodeFrom, "decodeFrom");
        return Flux.using(() -> open(transferId, prefill, blockCount, observer),
                t -> t.kv().thenMany(Flux.defer(() -> decodeFrom.apply(t))), DecodeTransfer::close);
    }

    /** The wait of {@link DecodeTransfer#kv()}. */
    Mono<Void> kv(DecodeTransfer t) {
        String id = t.id();
        Duration blocksWithin = settings.blocksWithin();
        Mono<Void> askForKv = Mono.defer(() -> {
                    blocks.writing(id);
                    return client.send(t.prefill(), settings.history.sent(new NotifyMessage.RemoteBlocks(id, id,
                            t.blocks(), 0, settings.incarnation, settings.region)), blocksWithin);
                })
                .flatMap(delivered -> delivered || settings.receiveDeadline == null ? Mono.<Void>empty()
                        : Mono.error(new ReceiveFailedException(id, ReceiveFailedException.Kind.UNDELIVERABLE, null,
                                "decode could not deliver its block list (remote_blocks) for transfer " + id
                                        + " to prefill's notify address " + LogText.hostPort(t.prefill()) + " within "
                                        + DurationText.of(blocksWithin) + ", so prefill cannot write this request's"
                                        + " KV; check that prefill is running and that its notify port is reachable"
                                        + " from decode, then retry")));
        Mono<Void> notice = expected.expect(id)
                .doOnSuccess(v -> t.prefillSettled(true))
                .doOnError(ReceiveFailedException.class, e -> t.prefillSettled(e.kind()
                        == ReceiveFailedException.Kind.WRITE_FAILED || e.kind() == ReceiveFailedException.Kind.CORRUPT));
        // expect() registers the transfer when subscribed, before remote_blocks lets prefill write
        Mono<Void> arrived = Mono.when(notice, askForKv);
        Mono<Void> kv = settings.reads == null ? arrived.doOnSuccess(v -> t.layersEnded(null))
                : arrived.then(Mono.defer(() -> reads.read(t)));
        return Mono.firstWithSignal(kv, t.stopped()) // the layers end last, after the wait's outcome is recorded
                .doOnSuccess(v -> waitEnded(t, DecodeRecorder.WaitOutcome.WRITE_DONE))
                .doOnError(e -> {
                    waitEnded(t, outcome(e));
                    t.failure(failureReason(e));
                    try (LogContext.Scope _ = LogContext.open(id, t.observer().traceId())) {
                        LOG.info("transfer {}: fails without its KV: {}", LogText.escape(id), e.getMessage());
                    }
                })
                .doOnCancel(() -> waitEnded(t, DecodeRecorder.WaitOutcome.CANCELLED))
                .doOnError(t::layersEnded)
                .doOnCancel(() -> t.layersEnded(new ReceiveFailedException(id, ReceiveFailedException.Kind.SHUTTING_DOWN,
                        null, "transfer " + id + "'s wait for its KV was cancelled")));
    }

    private void sendRelease(DecodeTransfer t, long prefillIncarnation) {
        sends.release(t.id(), t.observer().traceId(), t.prefill(), prefillIncarnation, settings.reads.tpSize());
    }

    private void waitEnded(DecodeTransfer t, DecodeRecorder.WaitOutcome outcome) {
        if (t.waitEnded()) {
            settings.history.kvWaitEnded(t.id(), outcome);
            settings.recorder.kvWaitEnded(outcome, settings.clock.nanos() - t.openedNanos());
        }
    }

    private static DecodeRecorder.WaitOutcome outcome(Throwable e) {
        if (e instanceof ReceiveFailedException failed) {
            return DecodeRecorder.WaitOutcome.valueOf(failed.kind().name());
        }
        if (e instanceof TransferRefusedException) {
            return DecodeRecorder.WaitOutcome.DUPLICATE;
        }
        return DecodeRecorder.WaitOutcome.ERROR;
    }

    private String failureReason(Throwable e) {
        if (!(e instanceof ReceiveFailedException failed)) {
            return "decode's request failed: " + e.getMessage();
        }
        return switch (failed.kind()) {
            case DEADLINE -> "decode's receive deadline" + (settings.receiveDeadline == null ? ""
                    : " of " + DurationText.of(settings.receiveDeadline)) + " passed";
            case UNDELIVERABLE -> "decode could not deliver its block list";
            case SHUTTING_DOWN -> "decode is shutting down";
            case PREFILL_RESTARTED -> "prefill restarted";
            case WRITE_FAILED, CORRUPT, READ_FAILED -> "decode's request failed: " + e.getMessage();
        };
    }

    /**
     * {@code t} has ended, once: its blocks are quarantined until prefill's release (freed at once if it came
     * already), and prefill is told {@code abort} unless it already said how the write ended.
     */
    void ended(DecodeTransfer t) {
        active.remove(t.id(), t);
        settings.history.record(TransferHistory.Kind.ENDED, t.id(), "");
        boolean readsStarted = settings.reads != null && t.endReads();
        if (settings.reads != null && (!readsStarted || t.readsDrained())) {
            // READ mode: nothing writes into decode's blocks now; prefill's offered, unread blocks may go too
            blocks.release(t.id());
            if (t.readReady() != null && !readsStarted) {
                sendRelease(t, t.readReady().incarnation());
            }
        }
        // the lease counts from the receive deadline at the earliest: prefill may start copies until its own deadline
        // (as long, from about then) even if this one ended early and the abort telling it so was lost
        blocks.end(t.id(), settings.blockLease, settings.receiveDeadline == null ? settings.clock.nanos()
                : t.openedNanos() + settings.receiveDeadline.toNanos());
        if (!t.prefillSettled()) {
            sends.abort(t.id(), t.observer().traceId(), t.prefill(), t.failure() != null ? t.failure()
                    : "decode's client went away before the KV arrived");
        }
    }

    /** Frees quarantined blocks whose lease passed: prefill never said release. */
    private void reap() {
        for (String owner : blocks.reclaimExpired()) {
            try (LogContext.Scope _ = LogContext.open(owner, null)) {
                LOG.warn("transfer {}: prefill did not release decode's blocks within the lease of {} after the"
                        + " request ended (or after its receive deadline, if later); reclaimed them (prefill is gone,"
                        + " unreachable, or never saw the transfer)", LogText.escape(owner),
                        DurationText.of(settings.blockLease));
            }
        }
    }

    /** This side's incarnation, new at every start; prefill fences what it wrote for a previous one. */
    public long incarnation() {
        return settings.incarnation;
    }

    /** The address the notify server listens on (with the real port when 0 was asked). */
    public InetSocketAddress notifyAddress() {
        return notify.address();
    }

    /** How many connections the notify server holds now. */
    public int notifyConnections() {
        return notify.openConnections();
    }

    /** The blocks per state now. */
    public BlockAllocator.Snapshot blocks() {
        return blocks.snapshot();
    }

    /** How many blocks the side has. */
    public int blockCapacity() {
        return blocks.capacity();
    }

    /** Transfers opened and not yet closed. */
    public int running() {
        return active.size();
    }

    /** The receive deadline, or null when transfers wait for their notice without one. */
    public Duration receiveDeadline() {
        return settings.receiveDeadline;
    }

    /**
     * Stops: new transfers are refused ({@code SHUTTING_DOWN}, prefill told {@code abort}), every transfer still
     * waiting for its KV fails as {@code SHUTTING_DOWN} (so each is told {@code abort} when it is closed), this
     * waits up to 2 s for those aborts and for the reads in flight (READ mode) to drain and their {@code release} to
     * be sent, so that no read still writes into decode's memory once it returns, then the notify server and client
     * close. Blocks, in real time. Logs what it did.
     */
    @Override
    public void close() {
        close(ABORTS_ON_CLOSE_WITHIN);
    }

    /**
     * As {@link #close()}, waiting up to {@code grace} for the failed transfers to close, the reads in flight to
     * drain and the aborts and releases to be sent.
     */
    public void close(Duration grace) {
        Objects.requireNonNull(grace, "grace");
        closing = true;
        List<DecodeTransfer> failed = new ArrayList<>();
        for (DecodeTransfer t : active.values()) {
            if (!t.prefillSettled() && t.fail(new ReceiveFailedException(t.id(),
                    ReceiveFailedException.Kind.SHUTTING_DOWN, null, SHUTTING_DOWN))) {
                failed.add(t);
            }
        }
        // each failed transfer tells prefill abort when its consumer closes it, after answering its client
        long until = System.nanoTime() + grace.toNanos();
        while ((sends.inFlight() > 0 || readsInFlight() > 0 || failed.stream().anyMatch(t -> active.containsKey(t.id())))
                && until - System.nanoTime() > 0) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        LOG.info("decode stopping: {} requests waiting for their KV failed and prefill was told abort ({} messages not"
                + " confirmed, {} transfers' reads still in flight)", failed.size(), sends.inFlight(), readsInFlight());
        reaper.dispose();
        notify.close();
        client.close();
        settings.history.record(TransferHistory.Kind.STOPPED, "", "");
    }

    /** READ mode: how many transfers' reads are in flight (posted, not yet drained or given up on); 0 in WRITE mode. */
    public int readsInFlight() {
        return reads == null ? 0 : reads.inFlight();
    }

    /** What a side was built with. */
    private record Settings(Duration receiveDeadline, Duration blockLease, ContentCheck contentCheck,
            DecodeRecorder recorder, long incarnation, int maxBlocksPerTransfer, KvRegion region, DecodeReads.Settings reads,
            SideClock clock, SideHistory history) {
        /** How long remote_blocks is retried: half the receive deadline (prefill needs the rest to write and notify). */
        Duration blocksWithin() {
            return receiveDeadline != null ? receiveDeadline.dividedBy(2) : NO_DEADLINE_BLOCKS_WITHIN;
        }
    }

    /**
     * A decode side's settings; immutable: every setter returns a changed copy. Everything has a default:
     * loopback on a free notify port, unsigned, {@link NotifyLimits#DEFAULTS}, {@value #DEFAULT_BLOCKS} blocks,
     * the default receive deadline of a 30 s transfer timeout, a 60 s block lease, no content check, nothing
     * recorded.
     */
    public static final class Builder extends SideSettings<Builder> {
        private DecodeRecorder recorder = DecodeRecorder.NOOP;
        private Duration receiveDeadline = defaultReceiveDeadline(PrefillSide.DEFAULT_TRANSFER_TIMEOUT);
        private Duration blockLease = DEFAULT_BLOCK_LEASE;
        private KvRegion region;
        private DecodeReads.Settings reads;

        private Builder() {
            super("decode", DEFAULT_BLOCKS);
        }

        private Builder(Builder from) {
            super(from);
            recorder = from.recorder;
            receiveDeadline = from.receiveDeadline;
            blockLease = from.blockLease;
            region = from.region;
            reads = from.reads;
        }

        /**
         * Where this decode's KV lives: its engine's and its registered region's packed descriptors, sent to
         * prefill with every block list (the handshake; prefill's {@link HandshakeSessions} opens its session from
         * them). Default none: prefill then writes through whatever sessions it was given.
         */
        public Builder region(KvRegion region) {
            return with(b -> b.region = region);
        }

        /**
         * READ mode (see {@link KvMode#READ}): decode reads each transfer's KV from prefill once prefill says
         * {@code read_ready}, through the session {@code prefillSessions} gives for that prefill incarnation (a
         * {@link HandshakeSessions} opens it from the region prefill describes), one {@code batch_read} per layer of
         * {@code layout} (decode's own KV layout), each layer's barrier run by {@code reads}; once the reads have
         * drained, prefill is told {@code release} with {@code tpSize} as its {@code consumer_tp_size}. Default
         * WRITE mode.
         */
        public Builder readFrom(DecodeSessions prefillSessions, KvLayout layout, LayerReads reads, int tpSize) {
            Objects.requireNonNull(prefillSessions, "prefillSessions");
            Objects.requireNonNull(layout, "layout");
            Objects.requireNonNull(reads, "reads");
            if (tpSize < 1 || tpSize > dev.kvflux.transfer.notify.NotifyCodec.MAX_TP_SIZE) {
                throw new IllegalArgumentException("the TP size must lie in 1.."
                        + dev.kvflux.transfer.notify.NotifyCodec.MAX_TP_SIZE + ", got " + tpSize);
            }
            DecodeReads.Settings set = new DecodeReads.Settings(prefillSessions, layout, reads, tpSize);
            return with(b -> b.reads = set);
        }

        @Override
        Builder copy() {
            return new Builder(this);
        }

        /** Where what becomes of the transfers is reported; default nothing. */
        public Builder recorder(DecodeRecorder recorder) {
            Objects.requireNonNull(recorder, "recorder");
            return with(b -> b.recorder = recorder);
        }

        /**
         * How long a transfer waits for its notice after it is opened; longer than prefill's transfer timeout, so
         * prefill's own {@code write_failed} comes first (default {@link #defaultReceiveDeadline} of 30 s).
         * {@code null} waits without a deadline: vLLM's behaviour before its fix, kept to measure against.
         */
        public Builder receiveDeadline(Duration receiveDeadline) {
            if (receiveDeadline != null && (receiveDeadline.isZero() || receiveDeadline.isNegative())) {
                throw new IllegalArgumentException("the receive deadline must be positive, got "
                        + DurationText.of(receiveDeadline));
            }
            return with(b -> b.receiveDeadline = receiveDeadline);
        }

        /**
         * How long an ended transfer's blocks stay QUARANTINED when prefill never says {@code release} (prefill is
         * gone), counted from the later of the end and the receive deadline. Default 60 s.
         */
        public Builder blockLease(Duration blockLease) {
            Objects.requireNonNull(blockLease, "blockLease");
            if (blockLease.isZero() || blockLease.isNegative()) {
                throw new IllegalArgumentException("the block lease must be positive, got " + DurationText.of(blockLease)
                        + "; the default is twice the transfer timeout");
            }
            return with(b -> b.blockLease = blockLease);
        }

        /**
         * Binds the notify server and starts the side. Blocks up to about 10 s for the port.
         *
         * @throws IllegalStateException if the port cannot be bound (saying why)
         */
        public DecodeSide bindNow() {
            SideClock clock = clock();
            long incarnation = Incarnation.next();
            Settings settings = new Settings(receiveDeadline, blockLease, contentCheck, recorder, incarnation,
                    maxBlocksPerTransfer, region, reads, clock, new SideHistory(history, incarnation));
            ExpectedTransfers expected = (receiveDeadline == null ? ExpectedTransfers.withoutDeadline()
                    : ExpectedTransfers.withDeadline(receiveDeadline)).recorder(notifyRecorder)
                    .earlyBudget(limits.peerBudgetBytes());
            expected = clock.given() != null ? expected.scheduler(clock.given()) : expected;
            NotifyClient client = notifyClient();
            NotifyServer.Builder server = notifyServer().host(host).port(port)
                    .accepts(reads != null ? new NotifyMessage.Type[] {NotifyMessage.Type.READ_READY,
                            NotifyMessage.Type.WRITE_FAILED} : new NotifyMessage.Type[] {NotifyMessage.Type.WRITE_DONE,
                            NotifyMessage.Type.WRITE_FAILED, NotifyMessage.Type.RELEASE})
                    .limits(limits).recorder(notifyRecorder).auth(auth);
            try {
                return new DecodeSide(settings, client, expected, new BlockAllocator("decode", blocks, clock::nanos),
                        server);
            } catch (RuntimeException e) {
                client.close();
                throw e;
            }
        }
    }
}
