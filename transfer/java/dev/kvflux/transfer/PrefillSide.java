package dev.kvflux.transfer;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/**
 * The prefill side of KV transfers: it takes decode's block list for each transfer, writes the transfer's layers
 * into decode's blocks through a {@link WritePipeline}, tells decode exactly once how the write ended
 * ({@code write_done}, or {@code write_failed} with the status code and reason), obeys decode's {@code abort},
 * drains what it posted, frees its source blocks and says {@code release}. {@link PrefillTransfer} lists every
 * way a transfer ends.
 *
 * <p>An embedder gives its KV {@link KvLayout}, the {@linkplain DecodeSessions engine sessions} into decode's
 * memory, the WRITE pipeline (its wait, its requests in flight) and, per transfer, one GPU event per layer. The
 * side binds a notify server that takes only {@code remote_blocks} and {@code abort}, and sends through a notify
 * client; both sign with the {@linkplain Builder#auth notify secret} when one is set.
 *
 * <p>Safety rules it keeps: a transfer id that is running, was aborted (even before its request came) or has
 * ended is refused ({@link TransferRefusedException.Reason#DUPLICATE}), so a late or repeated request cannot write
 * for a transfer decode has given up on; decode's incarnations are tracked per address ({@link PeerIncarnations}):
 * a newer one fails every transfer aimed at the previous one at once, freeing everything, and a block list or abort
 * from an older one is dropped; a write that would start after the transfer's deadline (when decode gives up)
 * posts nothing. Block lists that come before their transfer are kept within the peer budget
 * ({@link NotifyLimits#peerBudgetBytes()}).
 *
 * <p>Threads and time: notify messages are handled on the notify server's event loop; {@link PrefillTransfer#write}
 * runs on the caller's thread until the pipeline takes over; outcomes, drains and releases run on the pipeline's and
 * the waits' schedulers. The transfers' deadlines, the wait for decode's block list, READ mode's event polls and
 * read lease, and the notify client's retries run on the {@linkplain Builder#scheduler scheduler} (default
 * {@code Schedulers.parallel()}) and keep its time. {@link #close(Duration)} blocks, in real time.
 */
public final class PrefillSide implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PrefillSide.class);
    /** Why a transfer is refused once the side is closing. */
    private static final String SHUTTING_DOWN = "prefill is shutting down and takes no new transfers; retry on another"
            + " prefill instance";
    /** KV blocks by default. */
    public static final int DEFAULT_BLOCKS = 1 << 16;
    /** The transfer timeout by default, as vLLM's MoRIIO connector has it. */
    public static final Duration DEFAULT_TRANSFER_TIMEOUT = Duration.ofSeconds(30);

    private final Settings settings;
    private final NotifyServer notify;
    private final NotifyClient client;
    private final PrefillWrites writes;
    private final PrefillTransfers transfers;
    private final BlockAllocator blocks;
    private final PrefillNotices notices;
    private final Disposable reaper;
    private volatile boolean closing;

    private PrefillSide(Settings settings, NotifyServer notify, NotifyClient client, BlockAllocator blocks,
            PrefillTransfers transfers, RemoteBlockBoard board) {
        this.settings = settings;
        this.notify = notify;
        this.client = client;
        this.blocks = blocks;
        this.transfers = transfers;
        this.writes = new PrefillWrites(settings, client, blocks, transfers, board);
        this.notices = new PrefillNotices(this, settings.recorder, transfers, board);
        Duration quarter = settings.decodeDeadline.dividedBy(4);
        Duration every = quarter.compareTo(Duration.ofSeconds(1)) > 0 ? Duration.ofSeconds(1)
                : quarter.toMillis() < 1 ? Duration.ofMillis(1) : quarter;
        this.reaper = Flux.interval(every, settings.clock.scheduler()).subscribe(tick -> abortUnwritten());
        settings.history.started(notify.address());
    }

    /**
     * Aborts every transfer opened and not written by its deadline: decode has given up on it, and nothing else
     * would free its blocks if its embedder never writes or closes it.
     */
    private void abortUnwritten() {
        long now = settings.clock.nanos();
        for (PrefillTransfer t : transfers.running()) {
            if (!t.wrote() && now - t.deadlineNanos() > 0) {
                settings.recorder.record(PrefillRecorder.Event.PAST_DEADLINE, t.id());
                abort(t, "it was opened but not written by the transfer's deadline ("
                        + DurationText.of(settings.decodeDeadline) + " after it was opened), when decode gives up on it");
            }
        }
    }

    /** A prefill side's settings; {@link Builder#bindNow()} starts one. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Opens a transfer towards the decode at notify address {@code decode}, allocating {@code blockCount} source
     * blocks for it. Its deadline (when decode gives up on it) is the side's {@linkplain Builder#decodeDeadline
     * decode deadline} from now. Write it with {@link PrefillTransfer#write}, or end it with
     * {@link PrefillTransfer#close()} if it will not be written. An abort that comes while it is being opened (decode's,
     * or {@link PrefillTransfer#abort} from another thread) is not lost: the transfer returned is aborted, holds no
     * blocks, and {@link PrefillTransfer#aborted()} says why.
     *
     * @param observer hooks into the transfer's life (spans, the trace id for log lines); {@link
     *     PrefillTransfer.Observer#NONE} for none
     * @throws TransferRefusedException with nothing allocated: the id is running, aborted or finished
     *     ({@code DUPLICATE}); its block list came from a previous incarnation of decode ({@code STALE_PEER}); it
     *     needs more blocks than one transfer may hold ({@code TOO_LARGE}); too few blocks are free
     *     ({@code OUT_OF_BLOCKS}); the side is closing ({@code SHUTTING_DOWN})
     * @throws IllegalArgumentException if {@code blockCount} is under 1
     */
    public PrefillTransfer open(String transferId, InetSocketAddress decode, int blockCount,
            PrefillTransfer.Observer observer) {
        Objects.requireNonNull(transferId, "transferId");
        Objects.requireNonNull(decode, "decode");
        Objects.requireNonNull(observer, "observer");
        if (blockCount < 1) {
            throw new IllegalArgumentException("a transfer needs at least 1 block, got " + blockCount);
        }
        if (closing) {
            throw new TransferRefusedException(TransferRefusedException.Reason.SHUTTING_DOWN, SHUTTING_DOWN);
        }
        if (blockCount > settings.maxBlocksPerTransfer) {
            settings.recorder.record(PrefillRecorder.Event.REFUSED_OUT_OF_BLOCKS, transferId);
            throw new TransferRefusedException(TransferRefusedException.Reason.TOO_LARGE, "transfer " + transferId
                    + " needs " + blockCount + " KV blocks, more than the " + settings.maxBlocksPerTransfer
                    + " one transfer may hold on prefill; shorten the prompt");
        }
        long now = settings.clock.nanos();
        PrefillTransfer t;
        try {
            t = transfers.open(transferId, () -> new PrefillTransfer(this, transferId, decode, now,
                    now + settings.decodeDeadline.toNanos(), observer));
        } catch (TransferRefusedException e) {
            settings.recorder.record(PrefillRecorder.Event.REFUSED_DUPLICATE, transferId);
            throw e;
        }
        settings.history.opened(transferId, List.of(), decode);
        if (closing) {
            // the side began closing since the check above: its sweep of running transfers may have missed this one
            writes.settle(t);
            throw new TransferRefusedException(TransferRefusedException.Reason.SHUTTING_DOWN, SHUTTING_DOWN);
        }
        if (!notices.earlyBlockListCurrent(t)) {
            throw new TransferRefusedException(TransferRefusedException.Reason.STALE_PEER, "transfer " + transferId
                    + "'s block list came from a previous incarnation of decode " + LogText.hostPort(decode)
                    + "; retry the request");
        }
        boolean open;
        try {
            open = t.localBlocks(blocks.allocate(transferId, blockCount));
        } catch (BlockAllocator.OutOfBlocksException e) {
            settings.recorder.record(PrefillRecorder.Event.REFUSED_OUT_OF_BLOCKS, transferId);
            writes.settle(t);
            throw new TransferRefusedException(TransferRefusedException.Reason.OUT_OF_BLOCKS, e.getMessage());
        }
        if (!open) {
            // aborted since it was opened: its settling may have run before the blocks were taken; the caller sees
            // an aborted transfer (aborted() tells why), holding nothing
            blocks.free(transferId);
        }
        return t;
    }

    /** This side's incarnation, new at every start; decode fences what it sent a previous one. */
    public long incarnation() {
        return settings.incarnation;
    }

    /** Where the side's transfers' history goes. */
    SideHistory history() {
        return settings.history;
    }

    /** The address the notify server listens on (with the real port when 0 was asked). */
    public InetSocketAddress notifyAddress() {
        return notify.address();
    }

    /** How many connections the notify server holds now. */
    public int notifyConnections() {
        return notify.openConnections();
    }

    /** The WRITE pipeline transfers are written through (its places in flight and queued). */
    public WritePipeline pipeline() {
        return settings.pipeline;
    }

    /** The source blocks per state now. */
    public BlockAllocator.Snapshot blocks() {
        return blocks.snapshot();
    }

    /** How many source blocks the side has. */
    public int blockCapacity() {
        return blocks.capacity();
    }

    /** Transfers opened and not yet ended. */
    public int running() {
        return transfers.size();
    }

    /** The running transfer with this id, or null. */
    public PrefillTransfer transfer(String transferId) {
        return transfers.get(transferId);
    }

    /** The transfer timeout: each completion wait's bound, and the drain's before release. */
    public Duration transferTimeout() {
        return settings.transferTimeout;
    }

    /** How long after it is opened decode gives up on a transfer, as this side counts it. */
    public Duration decodeDeadline() {
        return settings.decodeDeadline;
    }

    void write(PrefillTransfer t, List<? extends dev.kvflux.bindings.LayerEvent> events) {
        if (events.size() != settings.layout.layers()) {
            throw new IllegalArgumentException("transfer " + t.id() + " needs one event per layer: the layout has "
                    + settings.layout.layers() + " layers, got " + events.size() + " events");
        }
        if (settings.clock.nanos() - t.deadlineNanos() > 0) {
            // decode has given up on it by now and may reuse its blocks once its lease passes: post nothing
            settings.recorder.record(PrefillRecorder.Event.PAST_DEADLINE, t.id());
            abort(t, "its write came after the transfer's deadline (" + DurationText.of(settings.decodeDeadline)
                    + " after it was opened), when decode has given up on it");
            return;
        }
        writes.write(t, events);
    }

    /** The sessions into decodes' memory this side writes through. */
    DecodeSessions sessions() {
        return settings.sessions;
    }

    void settle(PrefillTransfer t) {
        writes.settle(t);
    }

    /**
     * Aborts {@code t}: its write stops, and once what was posted is terminal its blocks are freed and decode gets
     * {@code release}.
     */
    boolean abort(PrefillTransfer t, String reason) {
        try (LogContext.Scope _ = LogContext.open(t.id(), t.observer().traceId())) {
            if (!t.markAborted(reason)) {
                return false;
            }
            settings.recorder.record(PrefillRecorder.Event.ABORTED, t.id());
            settings.history.record(TransferHistory.Kind.ABORTED, t.id(), reason);
            LOG.info("transfer {}: aborted ({}); {}", LogText.escape(t.id()), reason,
                    t.wrote() ? "its write is stopped and what was posted is drained" : "nothing was written");
            writes.settle(t);
            return true;
        }
    }

    /** Closes with a grace of the transfer timeout. */
    @Override
    public void close() {
        close(settings.transferTimeout);
    }

    /**
     * Stops gracefully: new transfers are refused ({@code SHUTTING_DOWN}); running ones get {@code grace} (at most
     * the transfer timeout) to finish; each one left is stopped and decode is told {@code write_failed}
     * ({@code ERR_BAD_STATE}, "prefill is shutting down") with its {@link PrefillTransfer#write} {@code Mono}
     * emitting that outcome; then up to 2 s more for the drains and messages; then the notify server and client
     * close. Blocks the calling thread. Logs what it did.
     */
    public void close(Duration grace) {
        closing = true;
        reaper.dispose();
        long start = System.nanoTime();
        Duration bounded = grace.compareTo(settings.transferTimeout) < 0 ? grace : settings.transferTimeout;
        int running = transfers.size();
        writes.waitUntil(() -> transfers.size() == 0, bounded);
        int finished = running - transfers.size();
        int stopped = writes.stopAll("prefill is shutting down; the KV was not written within the shutdown grace of "
                + DurationText.of(bounded) + "; retry the request");
        writes.waitUntil(() -> transfers.size() == 0 && writes.idle(), Duration.ofSeconds(2));
        LOG.info("prefill stopping: {} running transfers finished within {} ms, {} stopped with write_failed"
                + " (\"prefill is shutting down\"), {} not settled, {} messages to decode not confirmed", finished,
                (System.nanoTime() - start) / 1_000_000, stopped, transfers.size(), writes.sending());
        writes.dispose();
        notify.close();
        client.close();
        settings.history.record(TransferHistory.Kind.STOPPED, "", "");
    }

    /** What a side was built with; shared with its writes. */
    record Settings(KvLayout layout, DecodeSessions sessions, WritePipeline pipeline, Duration transferTimeout,
            Duration decodeDeadline, Duration notifyWithin, boolean failureNotices, ContentCheck contentCheck,
            PrefillRecorder recorder, long incarnation, int maxBlocksPerTransfer, KvMode mode, KvRegion region,
            Duration readLease, SideClock clock, SideHistory history) {
    }

    /**
     * A prefill side's settings; immutable: every setter returns a changed copy. The layout, the sessions and the
     * pipeline must be set; everything else has a default: loopback on a free notify port, unsigned,
     * {@link NotifyLimits#DEFAULTS}, {@value #DEFAULT_BLOCKS} blocks, a 30 s transfer timeout, decode's default
     * receive deadline for that timeout, failure notices on, no content check, nothing recorded.
     */
    public static final class Builder extends SideSettings<Builder> {
        private PrefillRecorder recorder = PrefillRecorder.NOOP;
        private KvLayout layout;
        private DecodeSessions sessions;
        private WritePipeline pipeline;
        private Duration transferTimeout = DEFAULT_TRANSFER_TIMEOUT;
        private Duration decodeDeadline;
        private Duration notifyWithin;
        private boolean failureNotices = true;
        private KvMode mode = KvMode.WRITE;
        private KvRegion region;
        private Duration readLease;

        private Builder() {
            super("prefill", DEFAULT_BLOCKS);
        }

        private Builder(Builder from) {
            super(from);
            recorder = from.recorder;
            layout = from.layout;
            sessions = from.sessions;
            pipeline = from.pipeline;
            transferTimeout = from.transferTimeout;
            decodeDeadline = from.decodeDeadline;
            notifyWithin = from.notifyWithin;
            failureNotices = from.failureNotices;
            mode = from.mode;
            region = from.region;
            readLease = from.readLease;
        }

        @Override
        Builder copy() {
            return new Builder(this);
        }

        /** Where what becomes of the transfers is reported; default nothing. */
        public Builder recorder(PrefillRecorder recorder) {
            Objects.requireNonNull(recorder, "recorder");
            return with(b -> b.recorder = recorder);
        }

        /** The KV layout: how many layers a transfer has and which copies move one layer. Required. */
        public Builder layout(KvLayout layout) {
            Objects.requireNonNull(layout, "layout");
            return with(b -> b.layout = layout);
        }

        /** The engine sessions into decode's memory. Required. */
        public Builder sessions(DecodeSessions sessions) {
            Objects.requireNonNull(sessions, "sessions");
            return with(b -> b.sessions = sessions);
        }

        /** The WRITE pipeline transfers are written through (its wait, its requests in flight). Required. */
        public Builder pipeline(WritePipeline pipeline) {
            Objects.requireNonNull(pipeline, "pipeline");
            return with(b -> b.pipeline = pipeline);
        }

        /**
         * The transfer timeout: the bound of the drain before {@code release} and of the shutdown grace. Give the
         * pipeline's wait the same. Default 30 s.
         */
        public Builder transferTimeout(Duration transferTimeout) {
            Duration checked = positive(transferTimeout, "transfer timeout");
            return with(b -> b.transferTimeout = checked);
        }

        /**
         * How long after a transfer is opened its decode gives up on it (its receive deadline, counted from about
         * the same moment); a write that would start later posts nothing. Default
         * {@link DecodeSide#defaultReceiveDeadline} of the transfer timeout.
         */
        public Builder decodeDeadline(Duration decodeDeadline) {
            Duration checked = positive(decodeDeadline, "decode deadline");
            return with(b -> b.decodeDeadline = checked);
        }

        /** How long an outcome or release is retried towards decode before it counts as undeliverable. Default: the decode deadline. */
        public Builder notifyWithin(Duration notifyWithin) {
            Duration checked = positive(notifyWithin, "notify deadline");
            return with(b -> b.notifyWithin = checked);
        }

        /**
         * Whether decode is told {@code write_failed} when a write fails (default true). False is vLLM's behaviour
         * before its fix, kept to measure against: decode is told nothing and waits for its deadline, or for ever.
         */
        public Builder failureNotices(boolean failureNotices) {
            return with(b -> b.failureNotices = failureNotices);
        }

        /**
         * Who moves the KV: {@link KvMode#WRITE} (default), prefill writes each layer into decode's blocks;
         * {@link KvMode#READ}, prefill keeps the KV in its own blocks, tells decode {@code read_ready} once every
         * layer's event is ready, and holds the blocks until decode's {@code release}, an abort or the
         * {@linkplain #readLease read lease}. A READ side needs no sessions into decode and takes {@code release}.
         */
        public Builder mode(KvMode mode) {
            Objects.requireNonNull(mode, "mode");
            return with(b -> b.mode = mode);
        }

        /**
         * Where this prefill's KV lives (its engine's and its registered region's descriptors), sent with every
         * {@code read_ready} so that decode can open its session into it. Default none.
         */
        public Builder region(KvRegion region) {
            return with(b -> b.region = region);
        }

        /**
         * READ mode: how long a transfer's blocks stay held after {@code read_ready} when decode never says
         * {@code release} (decode died mid-read). Default the decode deadline plus twice the transfer timeout,
         * longer than any read decode may still have in flight.
         */
        public Builder readLease(Duration readLease) {
            Duration checked = positive(readLease, "read lease");
            return with(b -> b.readLease = checked);
        }

        /**
         * Binds the notify server and starts the side. Blocks up to about 10 s for the port.
         *
         * @throws IllegalStateException if the layout, the sessions or the pipeline is not set, or the port cannot
         *     be bound (saying why)
         */
        public PrefillSide bindNow() {
            if (mode == KvMode.READ && sessions == null) {
                sessions = (decode, incarnation) -> {
                    throw new IllegalStateException("a READ prefill writes nothing into decode");
                };
            }
            if (layout == null || sessions == null || pipeline == null) {
                throw new IllegalStateException("a prefill side needs a KV layout, decode sessions and a WRITE pipeline;"
                        + " set layout(...), sessions(...) and pipeline(...)");
            }
            if (blocks > layout.blockCapacity()) {
                throw new IllegalStateException("a prefill side of " + blocks + " blocks needs a layout that addresses"
                        + " as many; this one addresses " + layout.blockCapacity() + " (give blocks(...) at most that,"
                        + " or a layout with longer rows)");
            }
            Duration deadline = decodeDeadline != null ? decodeDeadline
                    : DecodeSide.defaultReceiveDeadline(transferTimeout);
            long incarnation = Incarnation.next();
            Settings settings = new Settings(layout, sessions, pipeline, transferTimeout, deadline,
                    notifyWithin != null ? notifyWithin : deadline, failureNotices, contentCheck, recorder,
                    incarnation, maxBlocksPerTransfer, mode, region,
                    readLease != null ? readLease : deadline.plus(transferTimeout.multipliedBy(2)), clock(),
                    new SideHistory(history, incarnation));
            RemoteBlockBoard board = new RemoteBlockBoard(limits.peerBudgetBytes(), RemoteBlockBoard.DEFAULT_CAPACITY,
                    notifyRecorder);
            BlockAllocator blockAllocator = new BlockAllocator("prefill", blocks, settings.clock()::nanos);
            PrefillTransfers transfers = new PrefillTransfers();
            // the side handles messages once it exists; what comes before (nothing can: the port is new) goes to the board
            PrefillSide[] side = new PrefillSide[1];
            NotifyServer server = notifyServer().host(host).port(port)
                    .accepts(mode == KvMode.READ ? new NotifyMessage.Type[] {NotifyMessage.Type.REMOTE_BLOCKS,
                            NotifyMessage.Type.ABORT, NotifyMessage.Type.RELEASE} : new NotifyMessage.Type[] {
                            NotifyMessage.Type.REMOTE_BLOCKS, NotifyMessage.Type.ABORT}).limits(limits)
                    .recorder(notifyRecorder).auth(auth).handler(message -> {
                        PrefillSide s = side[0];
                        if (s != null) {
                            s.notices.accept(message);
                        } else {
                            board.accept(message);
                        }
                    }).bindNow();
            NotifyClient client = notifyClient();
            side[0] = new PrefillSide(settings, server, client, blockAllocator, transfers, board);
            return side[0];
        }

        private static Duration positive(Duration value, String what) {
            Objects.requireNonNull(value, what);
            if (value.isZero() || value.isNegative()) {
                throw new IllegalArgumentException("the " + what + " must be positive, got " + DurationText.of(value));
            }
            return value;
        }
    }
}
