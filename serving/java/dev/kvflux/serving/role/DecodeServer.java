package dev.kvflux.serving.role;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.ContentCheck;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import dev.kvflux.transfer.DecodeRanks;
import dev.kvflux.transfer.TpRanks;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.netty.DisposableServer;
import dev.kvflux.transfer.HandshakeSessions;
import dev.kvflux.transfer.KvLayout;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.LayerReads;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.transfer.PrefillSide;

/**
 * A simulated decode instance: HTTP in front of kvflux's {@link DecodeSide}. For each {@code POST /v1/completions}
 * that came through the proxy it opens the request's transfer, sends prefill the blocks it granted, waits for
 * {@code write_done}, then decodes {@code max_tokens} tokens ({@link DecodeCompletions}).
 *
 * <p>When prefill reports {@code write_failed}, the request fails with 503 and an OpenAI-style error naming
 * prefill's code and reason; when the receive deadline passes first, with 504; a request whose transfer id is
 * already in use, with 409. With a receive deadline, {@code remote_blocks} is retried for half of it; if it cannot
 * be delivered by then the request fails at once with 503 ({@code REMOTE_BLOCKS_UNDELIVERABLE}). Without a receive
 * deadline (vLLM's behaviour before its fix) a request whose notice never comes waits until its client gives up.
 * No free blocks: 503 {@code kv_blocks_exhausted} at once. An ended request's blocks stay QUARANTINED until
 * prefill's {@code release} or the block lease, and prefill is told {@code abort} unless it already said how the
 * write ended. {@link #close()} fails waiting requests with a reason and tells prefill.
 *
 * <p>{@code GET /health} answers 200; {@code GET /metrics} serves the role's meters as Prometheus text
 * ({@link RoleMetrics}), all tagged {@code role=decode}: the notify channel's ({@code MicrometerNotifyRecorder}),
 * the block meters ({@link BlockMetrics}), {@link DecodeStats} (with the timer {@code kvflux.decode.kv.wait}), and
 * the gauges {@code kvflux.decode.requests.running} and {@code kvflux.notify.connections.open}. In READ mode, where
 * decode waits for the reads it posts, the gauge {@code kvflux.wait.strategy} and the startup line
 * ({@code wait reactive-push}) name that wait: a push wait where the engine pushes completion, which decode switches
 * on, else the adaptive poll ({@link WaitChoice}).
 *
 * <p>Every log line about a request carries its transfer id (and trace id) in MDC ({@link LogContext}). With an
 * {@link Builder#observationRegistry ObservationRegistry} that traces, each completion is span
 * {@code kvflux.decode.request}, continuing the {@code traceparent} header, with children
 * {@code kvflux.decode.receive} (waiting for the KV's notice) and {@code kvflux.decode.generate} (decoding); a
 * notice that carries a traceparent is span {@code kvflux.notify.receive}, a child of prefill's
 * {@code kvflux.notify.send}.
 */
public final class DecodeServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeServer.class);
    /** KV blocks per instance by default. */
    public static final int DEFAULT_KV_BLOCKS = DecodeSide.DEFAULT_BLOCKS;
    /** How long blocks whose prefill never said release stay quarantined by default: 2 × the default transfer timeout. */
    public static final Duration DEFAULT_BLOCK_LEASE = DecodeSide.DEFAULT_BLOCK_LEASE;

    private final DisposableServer http;
    private final DecodeRanks ranks;
    /** Rank 0's side: the instance's notify address and incarnation. */
    private final DecodeSide side;
    private final String host;
    private final Listing listing;
    private final RoleMetrics meters;
    private final MicrometerNotifyRecorder notifyMeters;
    /** Closes what the instance made: its region's GPU stream, and the engine when it made its own. */
    private final Runnable ownedEngine;

    private DecodeServer(DisposableServer http, DecodeRanks ranks, String host, NotifyAuth auth, RoleMetrics meters,
            MicrometerNotifyRecorder notifyMeters, Runnable ownedEngine) {
        this.ownedEngine = ownedEngine;
        this.http = http;
        this.ranks = ranks;
        this.side = ranks.ranks().getFirst();
        this.host = host;
        this.listing = new Listing(auth);
        this.meters = meters;
        this.notifyMeters = notifyMeters;
    }

    /** A decode instance's settings; {@link Builder#bindNow()} binds it. Each setter checks its value. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * What a decode instance is started with. The model must be set; everything else has a default: loopback on
     * free ports, no receive deadline, unsigned notifications, {@link #DEFAULT_KV_BLOCKS},
     * {@link #DEFAULT_BLOCK_LEASE} and {@link NotifyLimits#DEFAULTS}.
     */
    public static final class Builder extends RoleSettings<Builder> {
        private Duration receiveDeadline;
        private Duration blockLease = DEFAULT_BLOCK_LEASE;
        private List<DescribedEngine> engines;
        private Duration transferTimeout = PrefillSide.DEFAULT_TRANSFER_TIMEOUT;

        private Builder() {
            super(DEFAULT_KV_BLOCKS);
        }

        /**
         * The engine decode's KV region is registered with; prefill writes into it through the descriptors decode
         * sends with every block list ({@link KvRegion}). The caller closes it after the instance. Default: a
         * simulated xGMI engine of the instance's own, closed with it. Over the C simulator or a GPU, decode checks
         * every block's bytes before it decodes.
         */
        public Builder engine(DescribedEngine engine) {
            this.engines = List.of(Objects.requireNonNull(engine, "engine"));
            return this;
        }

        /**
         * One engine per rank ({@link #tp}), in rank order, as {@link #engine} is for one: the caller closes them
         * after the instance. Default: a simulated xGMI engine of each rank's own.
         */
        public Builder engines(List<? extends DescribedEngine> engines) {
            this.engines = List.copyOf(engines);
            return this;
        }

        /** How long a request waits for its transfer's notice; {@code null} for no deadline. */
        public Builder receiveDeadline(Duration receiveDeadline) {
            if (receiveDeadline != null && (receiveDeadline.isZero() || receiveDeadline.isNegative())) {
                throw new IllegalArgumentException("the receive deadline must be positive, got "
                        + DurationText.of(receiveDeadline));
            }
            this.receiveDeadline = receiveDeadline;
            return this;
        }

        /**
         * READ mode: how long a layer's reads may run before the request fails (IN_PROGRESS), and the drain after a
         * failure. Default 30 s, as the transfer timeout.
         */
        public Builder transferTimeout(Duration transferTimeout) {
            this.transferTimeout = Objects.requireNonNull(transferTimeout, "transferTimeout");
            return this;
        }

        /**
         * The block lease: the blocks of a request that has ended stay QUARANTINED until prefill says
         * {@code release} or, when it never does (prefill is gone), until {@code blockLease} after the later of the
         * request's end and its receive deadline.
         *
         * @throws IllegalArgumentException if {@code blockLease} is not positive
         */
        public Builder blockLease(Duration blockLease) {
            Objects.requireNonNull(blockLease, "blockLease");
            if (blockLease.isZero() || blockLease.isNegative()) {
                throw new IllegalArgumentException("the block lease must be positive, got " + blockLease
                        + "; the default is twice the transfer timeout");
            }
            this.blockLease = blockLease;
            return this;
        }

        /**
         * Starts the instance. Blocks the calling thread until its ports are bound (up to about 10 s), so it must
         * not be called on a Reactor non-blocking thread (a Netty event loop, {@code Schedulers.parallel()}); from
         * a reactive chain, call it on {@code Schedulers.boundedElastic()}.
         *
         * @throws IllegalStateException if the model is not set, if a port cannot be bound, or at once, with
         *     nothing bound, if called on a non-blocking thread
         */
        public DecodeServer bindNow() {
            if (model == null) {
                throw new IllegalStateException("a decode instance needs a model; set it");
            }
            requireSecretOffLoopback("decode");
            if (engines != null && engines.size() != tp) {
                throw new IllegalStateException("decode runs " + tp + " rank(s) and was given " + engines.size()
                        + " engine(s); give one engine per rank");
            }
            Blocking.requireBlockingAllowed("DecodeServer.bindNow");
            return DecodeServer.bind(this);
        }
    }

    private static DecodeServer bind(Builder settings) {
        RoleAddresses where = settings.where;
        ServingModel model = settings.model;
        LogContext.enable();
        RoleMetrics meters = RoleMetrics.of(settings.meterRegistry, "decode");
        MicrometerNotifyRecorder notifyMeters = MicrometerNotifyRecorder.of(meters.registry(), meters.tags());
        int tp = settings.tp;
        TpRanks pair = new TpRanks(settings.peerTp, tp);
        List<DescribedEngine> engines = new ArrayList<>(tp);
        List<Runnable> owned = new ArrayList<>();
        dev.kvflux.serving.observe.HistoryLog history = settings.openHistory("decode");
        if (history != null) {
            owned.add(history::close); // closed last, after the sides said they stopped
        }
        Runnable closeOwned = () -> owned.reversed().forEach(Runnable::run);
        List<DecodeSide> sides = new ArrayList<>(tp);
        List<RoleMemory> memories = new ArrayList<>(tp);
        List<HandshakeSessions> readSessions = new ArrayList<>();
        List<WaitStrategy> readWaits = new ArrayList<>();
        DecodeStats stats = new DecodeStats(meters);
        try {
            if (settings.engines != null) {
                engines.addAll(settings.engines);
            } else {
                for (int r = 0; r < tp; r++) { // in the try: a failed start closes the history log and these
                    SimulatedXgmiEngine own = SimulatedXgmiEngine.create();
                    engines.add(own);
                    owned.add(own::close);
                }
            }
            KvLayout.Rows layout = RoleMemory.layout(model, settings.kvBlocks, pair, tp);
            for (int r = 0; r < tp; r++) {
                DescribedEngine engine = engines.get(r);
                RoleMemory memory = RoleMemory.register(engine, layout, settings.gpu, settings.gpuRuntime);
                memories.add(memory);
                owned.add(memory::close);
                ContentCheck check = memory.bytes() != null ? memory.bytes().check()
                        : KvChecksum.forLayers(model.layers());
                DecodeSide.Builder builder = DecodeSide.builder();
                if (settings.kvMode == KvMode.READ) {
                    // the rank's sessions into each prefill incarnation's KV, opened from what its read_ready says
                    HandshakeSessions prefills = HandshakeSessions.intoPrefills(engine, memory.region(), layout);
                    readSessions.add(prefills);
                    owned.add(prefills::close);
                    LayerReads reads = WaitChoice.reads(engine, settings.transferTimeout);
                    readWaits.add(reads.waitStrategy());
                    builder = builder.readFrom(prefills, layout, reads, tp);
                }
                DecodeSide side = builder.region(memory.describe(engine))
                        .notifyAddress(where.host(), RoleSettings.rankPort(where.notifyPort(), r)).auth(settings.auth)
                        .limits(settings.limits).notifyRecorder(notifyMeters).recorder(stats)
                        .blocks(layout.rowBlocks()).receiveDeadline(settings.receiveDeadline)
                        .blockLease(settings.blockLease).contentCheck(check)
                        .maxBlocksPerTransfer(settings.maxBlocksPerRequest())
                        .history(history != null ? history : dev.kvflux.transfer.TransferHistory.NONE)
                        .bindNow();
                sides.add(side);
            }
        } catch (RuntimeException e) {
            sides.forEach(DecodeSide::close);
            closeOwned.run();
            throw e;
        }
        DecodeRanks ranks = DecodeRanks.of(sides);
        try {
            RoleFront front = RoleFront.of(settings.auth, meters, settings.unsignedFrom);
            ClientShares shares = new ClientShares(settings.kvBlocks, settings.clientShare);
            shares.register(meters, "kvflux.decode");
            DecodeCompletions completions = new DecodeCompletions(model, ranks, pair, settings.observations,
                    front, shares, settings.maxModelLen, settings.kvMode == KvMode.READ,
                    dev.kvflux.serving.observe.Handover.of(meters, settings.handover), history);
            DisposableServer http = front.bind(where.host(), where.httpPort(), completions::serve, meters);
            BlockMetrics.register(meters, () -> BlockMetrics.sum(sides.stream().map(DecodeSide::blocks).toList()),
                    sides.stream().mapToInt(DecodeSide::blockCapacity).sum());
            BlockMetrics.registerIncarnation(meters, sides.getFirst().incarnation());
            meters.gauge("kvflux.decode.requests.running", "Requests from their arrival to their end", sides,
                    all -> all.stream().mapToInt(DecodeSide::running).sum() / (double) pair.links());
            meters.gauge("kvflux.notify.connections.open", "Inbound notify connections open", sides,
                    all -> all.stream().mapToInt(DecodeSide::notifyConnections).sum());
            EngineMeters.register(meters, engines);
            WaitChoice.register(meters, readWaits);
            if (!readSessions.isEmpty()) {
                meters.gauge("kvflux.decode.prefill.sessions.open", "READ mode: engine sessions open into prefills' KV"
                        + " regions, one per prefill incarnation and rank", readSessions,
                        all -> all.stream().mapToInt(HandshakeSessions::openSessions).sum());
            }
            List<KvBytes> bytes = memories.stream().map(RoleMemory::bytes).filter(Objects::nonNull).toList();
            if (!bytes.isEmpty()) {
                meters.gauge("kvflux.decode.kv.checked.bytes", "KV bytes decode read back and compared before"
                        + " decoding", bytes, all -> all.stream().mapToLong(KvBytes::checkedBytes).sum());
                meters.gauge("kvflux.decode.kv.check.seconds", "Time decode spent reading back and comparing KV",
                        bytes, all -> all.stream().mapToLong(KvBytes::checkNanos).sum() / 1e9);
                meters.gauge("kvflux.decode.kv.mismatched.blocks", "Blocks whose bytes were not the transfer's KV",
                        bytes, all -> all.stream().mapToLong(KvBytes::mismatchedBlocks).sum());
            }
            DecodeServer server = new DecodeServer(http, ranks, where.host(), settings.auth, meters, notifyMeters,
                    closeOwned);
            front.identify(Role.DECODE, server.incarnation(), server.notifyAddress());
            LOG.info("decode listening: http {}, notify {} ({}), model {}, {} mode{}, {}, receive deadline {}, KV on {}"
                    + " ({} bytes per rank{})",
                    Instance.hostPort(server.httpAddress()), server.instance().notifyRanks().stream()
                            .map(Instance::hostPort).toList(),
                    settings.auth == null ? "unsigned" : "signed", model, settings.kvMode.wireName().toUpperCase(),
                    readWaits.isEmpty() ? "" : ", wait " + WaitChoice.names(readWaits), pair, settings.receiveDeadline == null ? "none" : settings.receiveDeadline.toMillis() + " ms",
                    engines.getFirst().backend(), memories.getFirst().region().size(),
                    bytes.isEmpty() ? "" : ", every block checked");
            return server;
        } catch (RuntimeException e) {
            ranks.close();
            closeOwned.run();
            throw new IllegalStateException("cannot start decode's HTTP server on " + where.host() + ":"
                    + where.httpPort() + ": " + HttpLimits.bindFailure(where.host(), where.httpPort(), e), e);
        }
    }

    /**
     * Registers with a vLLM-style proxy's ZeroMQ discovery port at {@code proxy} ({@code host:port}): vLLM's own MoRIIO
     * proxy, or kvflux's with {@code --vllm-discovery}, now and every 3 s, as vLLM's connector does; its requests then
     * come in vLLM's shape ({@code kvflux prefill|decode --vllm-proxy}). {@code mode} is the transfer mode it says it
     * runs, which must be this instance's.
     */
    public DecodeServer registerWithVllmProxy(String proxy, dev.kvflux.transfer.KvMode mode) {
        listing.registerWithVllm(proxy, Listing.vllmRegistration(instance(), ranks.ranks().size(), mode),
                dev.kvflux.serving.vllm.VllmPinger.INTERVAL);
        return this;
    }

    /** Registers with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    public DecodeServer pingProxy(String proxyBaseUrl, Duration interval) {
        listing.pingProxy(proxyBaseUrl, instance(), interval, incarnation());
        return this;
    }

    /**
     * Registers in etcd instead of pinging a proxy: this instance's membership record, under {@code discovery}'s
     * cluster, held with a lease of its TTL and kept alive every third of it, signed with the notify secret when there
     * is one ({@link EtcdRegistration}). Every proxy watching the cluster routes to it; closing the instance revokes
     * the lease, so they drop it at once.
     */
    public DecodeServer registerIn(EtcdDiscovery discovery) {
        listing.registerIn(discovery, instance(), incarnation());
        return this;
    }

    /** This instance's incarnation, new at every start. */
    public long incarnation() {
        return side.incarnation();
    }

    /** This instance as the proxy knows it. */
    public Instance instance() {
        return new Instance(Role.DECODE, httpAddress(), notifyAddress(), ranks.ranks().stream()
                .map(r -> InetSocketAddress.createUnresolved(host, r.notifyAddress().getPort())).toList());
    }

    public InetSocketAddress httpAddress() {
        return InetSocketAddress.createUnresolved(host, ((InetSocketAddress) http.address()).getPort());
    }

    public InetSocketAddress notifyAddress() {
        return InetSocketAddress.createUnresolved(host, side.notifyAddress().getPort());
    }

    /** The registry the role's meters are in ({@link Builder#meterRegistry}). */
    public MeterRegistry meterRegistry() {
        return meters.registry();
    }

    /** The notify channel's counters (write_done, write_failed, deadlines, late notices, bad frames). */
    public MicrometerNotifyRecorder notifyMeters() {
        return notifyMeters;
    }

    /** The KV blocks per state now. */
    public BlockAllocator.Snapshot blocks() {
        return BlockMetrics.sum(ranks.ranks().stream().map(DecodeSide::blocks).toList());
    }

    /**
     * Stops serving: new requests are refused with 503 ({@code decode_shutting_down}), every request still waiting
     * for its KV fails with 503 and the reason, and prefill is told {@code abort} for each (this waits up to 2 s for
     * those to be delivered); then the ports close. Logs what it did.
     */
    @Override
    public void close() {
        listing.dispose();
        ranks.close();
        http.disposeNow();
        meters.close();
        ownedEngine.run();
    }
}
