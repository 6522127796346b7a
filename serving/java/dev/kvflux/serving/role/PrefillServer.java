package dev.kvflux.serving.role;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.HandshakeSessions;
import dev.kvflux.transfer.KvLayout;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.PrefillSide;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import dev.kvflux.transfer.PrefillRanks;
import dev.kvflux.transfer.TpRanks;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import dev.kvflux.transfer.KvMode;

/**
 * A simulated prefill instance: HTTP in front of kvflux's {@link PrefillSide}. For each {@code POST
 * /v1/completions} that came through the proxy it runs the prompt through the {@linkplain PrefillLoop simulated
 * model} ({@link PrefillCompletions}); during the prompt's last step each layer's event turns ready in turn, and
 * the side writes the layers into decode's blocks through the {@link WritePipeline} of its {@link Policy}, tells
 * decode the outcome ({@code write_failed} only when the policy sends failure notices), obeys {@code abort},
 * drains, frees and releases. A completion that finds {@link #DEFAULT_MAX_QUEUED_PROMPTS} (or the configured
 * number of) prompts already waiting for a prefill step is refused at once with 503, as is one whose prompt needs
 * more KV blocks than are free.
 *
 * <p>{@link #close()} stops gracefully. {@code GET /metrics} serves the role's meters as Prometheus text
 * ({@link RoleMetrics}): the write, request, abort and block meters ({@link PrefillStats}, {@link BlockMetrics}),
 * the notify channel's ({@code MicrometerNotifyRecorder}), the gauges {@code kvflux.prefill.transfers.running},
 * {@code kvflux.prefill.writes.in.flight}, {@code kvflux.prefill.writes.queued} and
 * {@code kvflux.notify.connections.open}, and the WRITE pipeline's wait meters ({@code kvflux.wait.*},
 * {@code MicrometerWaitRecorder}, tagged {@code strategy}), all tagged {@code role=prefill}. In WRITE mode the gauge
 * {@code kvflux.wait.strategy} and the startup line ({@code wait reactive-push}) name the wait the policy chose for
 * the engine ({@link Policy#writePipeline}).
 *
 * <p>Every log line about a request carries its transfer id (and trace id) in MDC ({@link LogContext}). With an
 * {@link Builder#observationRegistry ObservationRegistry} that traces, each completion is span
 * {@code kvflux.prefill.request}, continuing the {@code traceparent} header, with children
 * {@code kvflux.prefill.queue} (until the prompt's last prefill step is formed), {@code kvflux.prefill.post} (until
 * every layer is posted), {@code kvflux.prefill.wait} (the completion wait) and {@code kvflux.notify.send} (the
 * outcome to decode, whose frame carries the {@code traceparent}).
 */
public final class PrefillServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PrefillServer.class);
    /** KV blocks per instance by default. */
    public static final int DEFAULT_KV_BLOCKS = PrefillSide.DEFAULT_BLOCKS;
    /** How long running transfers may take to finish when prefill is stopped, by default. */
    public static final Duration DEFAULT_SHUTDOWN_GRACE = Duration.ofSeconds(10);
    /** How many prompts may wait for a prefill step by default before requests are refused with 503. */
    public static final int DEFAULT_MAX_QUEUED_PROMPTS = PrefillLoop.DEFAULT_MAX_QUEUED;

    private final DisposableServer http;
    private final PrefillRanks ranks;
    /** Rank 0's side: the instance's notify address and incarnation. */
    private final PrefillSide side;
    private final PrefillCompletions completions;
    private final PrefillLoop loop;
    private final Scheduler loopScheduler;
    private final PrefillStats stats;
    private final String host;
    private final Listing listing;
    private final RoleMetrics meters;
    private final MicrometerNotifyRecorder notifyMeters;
    private final List<HandshakeSessions> sessions;
    private final List<RoleMemory> memories;
    /** The transfers' history, closed after the ranks; null when none is written. */
    private final dev.kvflux.serving.observe.HistoryLog history;

    private PrefillServer(DisposableServer http, PrefillRanks ranks, PrefillCompletions completions, PrefillLoop loop,
            Scheduler loopScheduler, PrefillStats stats, String host, NotifyAuth auth, RoleMetrics meters,
            MicrometerNotifyRecorder notifyMeters, List<HandshakeSessions> sessions, List<RoleMemory> memories,
            dev.kvflux.serving.observe.HistoryLog history) {
        this.history = history;
        this.notifyMeters = notifyMeters;
        this.sessions = sessions;
        this.memories = memories;
        this.http = http;
        this.ranks = ranks;
        this.side = ranks.ranks().getFirst();
        this.completions = completions;
        this.loop = loop;
        this.loopScheduler = loopScheduler;
        this.stats = stats;
        this.host = host;
        this.listing = new Listing(auth);
        this.meters = meters;
    }

    /** A prefill instance's settings; {@link Builder#bindNow()} binds it. Each setter checks its value. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * What a prefill instance is started with. The model and the engine must be set; everything else has a
     * default: loopback on free ports, {@link Policy#KVFLUX}, the default transfer configuration, outcomes retried
     * towards decode for decode's default receive deadline, unsigned notifications,
     * {@link #DEFAULT_MAX_QUEUED_PROMPTS}, {@link #DEFAULT_KV_BLOCKS} and {@link NotifyLimits#DEFAULTS}.
     */
    public static final class Builder extends RoleSettings<Builder> {
        private Policy policy = Policy.KVFLUX;
        private List<DescribedEngine> engines;
        private PrefillLoop.StepListener steps;
        private KvfluxConfig.Transfer transfer = KvfluxConfig.defaults().transfer();
        private Duration notifyWithin;
        private int maxQueuedPrompts = DEFAULT_MAX_QUEUED_PROMPTS;

        private Builder() {
            super(DEFAULT_KV_BLOCKS);
        }

        /** What prefill does on a write's outcome (whether decode is told of failures, and how it waits). */
        public Builder policy(Policy policy) {
            this.policy = Objects.requireNonNull(policy, "policy");
            return this;
        }

        /**
         * The engine the KV cache is written through; prefill registers its KV region with it and imports each
         * decode's from the descriptors decode sends ({@link HandshakeSessions}). The simulated engine
         * ({@link SimulatedXgmiEngine}) hears of each prefill step ({@link SimulatedXgmiEngine#prefillStepQueued}),
         * so its copies contend with the forward pass as real copies do; over the C simulator or a GPU, the
         * stand-in forward pass writes every block's bytes and decode checks them.
         */
        public Builder engine(DescribedEngine engine) {
            this.engines = List.of(Objects.requireNonNull(engine, "engine"));
            return this;
        }

        /** One engine per rank ({@link #tp}), in rank order, as {@link #engine} is for one. */
        public Builder engines(List<? extends DescribedEngine> engines) {
            this.engines = List.copyOf(engines);
            return this;
        }

        /**
         * The whole {@code transfer} configuration (timeout, slice, fail mode, requests in flight, event poll and
         * timeout), applied to the policy's WRITE pipeline ({@link Policy#writePipeline}).
         */
        public Builder transfer(KvfluxConfig.Transfer transfer) {
            this.transfer = Objects.requireNonNull(transfer, "transfer");
            return this;
        }

        /** The transfer timeout, with the rest of the transfer configuration as it is. */
        public Builder transferTimeout(Duration transferTimeout) {
            this.transfer = transfer.withTimeout(Objects.requireNonNull(transferTimeout, "transferTimeout"));
            return this;
        }

        /** How long a write's outcome is retried towards decode before it counts as undeliverable. */
        public Builder notifyWithin(Duration notifyWithin) {
            Objects.requireNonNull(notifyWithin, "notifyWithin");
            if (notifyWithin.isZero() || notifyWithin.isNegative()) {
                throw new IllegalArgumentException("notifyWithin must be positive, got " + notifyWithin);
            }
            this.notifyWithin = notifyWithin;
            return this;
        }

        /**
         * At most {@code maxQueuedPrompts} prompts wait for a prefill step: a completion beyond that is refused at
         * once with 503 ({@code "type": "overloaded"}, {@code "code": "prefill_queue_full"}) and counted
         * ({@link PrefillStats#refusedQueueFull()}).
         *
         * @throws IllegalArgumentException if {@code maxQueuedPrompts} is not positive
         */
        public Builder maxQueuedPrompts(int maxQueuedPrompts) {
            if (maxQueuedPrompts < 1) {
                throw new IllegalArgumentException("maxQueuedPrompts must be at least 1, got " + maxQueuedPrompts);
            }
            this.maxQueuedPrompts = maxQueuedPrompts;
            return this;
        }

        /**
         * Starts the instance. Blocks the calling thread until its ports are bound (up to about 10 s), so it must
         * not be called on a Reactor non-blocking thread (a Netty event loop, {@code Schedulers.parallel()}); from
         * a reactive chain, call it on {@code Schedulers.boundedElastic()}.
         *
         * @throws IllegalStateException if the model or the engine is not set, if a port cannot be bound, or at
         *     once, with nothing bound, if called on a non-blocking thread
         */
        public PrefillServer bindNow() {
            if (model == null || engines == null) {
                throw new IllegalStateException("a prefill instance needs a model and an engine; set both");
            }
            if (engines.size() != tp) {
                throw new IllegalStateException("prefill runs " + tp + " rank(s) and was given " + engines.size()
                        + " engine(s); give one engine per rank");
            }
            requireSecretOffLoopback("prefill");
            Blocking.requireBlockingAllowed("PrefillServer.bindNow");
            return PrefillServer.bind(this);
        }

        private PrefillLoop.StepListener steps() {
            if (steps != null) {
                return steps;
            }
            // every rank's simulated engine hears of the step its ranks run together
            List<SimulatedXgmiEngine> sims = engines.stream().filter(SimulatedXgmiEngine.class::isInstance)
                    .map(SimulatedXgmiEngine.class::cast).toList();
            return sims.isEmpty() ? PrefillLoop.StepListener.NONE
                    : length -> sims.forEach(sim -> sim.prefillStepQueued(length));
        }
    }

    private static PrefillServer bind(Builder settings) {
        RoleAddresses where = settings.where;
        ServingModel model = settings.model;
        LogContext.enable();
        RoleMetrics meters = RoleMetrics.of(settings.meterRegistry, "prefill");
        PrefillStats stats = new PrefillStats(meters);
        MicrometerNotifyRecorder notifyMeters = MicrometerNotifyRecorder.of(meters.registry(), meters.tags());
        int tp = settings.tp;
        TpRanks pair = new TpRanks(tp, settings.peerTp);
        KvLayout.Rows layout = RoleMemory.layout(model, settings.kvBlocks, pair, tp);
        MicrometerWaitRecorder waits = MicrometerWaitRecorder.of(meters.registry(), meters.tags()).histograms(true);
        List<RoleMemory> memories = new ArrayList<>(tp);
        List<HandshakeSessions> sessions = new ArrayList<>(tp);
        List<WritePipeline> pipelines = new ArrayList<>(tp);
        List<PrefillSide> sides = new ArrayList<>(tp);
        dev.kvflux.serving.observe.HistoryLog history = settings.openHistory("prefill");
        Runnable closeRanks = () -> {
            sides.forEach(side -> side.close(Duration.ZERO));
            sessions.forEach(HandshakeSessions::close);
            memories.forEach(RoleMemory::close);
            if (history != null) {
                history.close();
            }
        };
        try {
            for (int r = 0; r < tp; r++) {
                DescribedEngine engine = settings.engines.get(r);
                RoleMemory memory = RoleMemory.register(engine, layout, settings.gpu, settings.gpuRuntime);
                memories.add(memory);
                HandshakeSessions rankSessions = HandshakeSessions.of(engine, memory.region(), layout);
                sessions.add(rankSessions);
                WritePipeline pipeline = settings.policy.writePipeline(engine, settings.transfer, waits);
                pipelines.add(pipeline);
                PrefillSide.Builder side = PrefillSide.builder()
                        .notifyAddress(where.host(), RoleSettings.rankPort(where.notifyPort(), r))
                        .auth(settings.auth).limits(settings.limits)
                        .notifyRecorder(notifyMeters).recorder(stats)
                        .layout(layout).sessions(rankSessions)
                        .pipeline(pipeline).blocks(layout.rowBlocks()).transferTimeout(settings.transfer.timeout())
                        .decodeDeadline(DecodeSide.defaultReceiveDeadline(settings.transfer.timeout()))
                        .failureNotices(settings.policy.failureNotice())
                        .contentCheck(KvChecksum.forLayers(model.layers()))
                        .maxBlocksPerTransfer(settings.maxBlocksPerRequest()).mode(settings.kvMode)
                        .history(history != null ? history : dev.kvflux.transfer.TransferHistory.NONE);
                if (settings.kvMode == KvMode.READ) {
                    // decode reads from this region: it opens its session from the descriptors every read_ready carries
                    side = side.region(memory.describe(engine));
                }
                if (settings.notifyWithin != null) {
                    side = side.notifyWithin(settings.notifyWithin);
                }
                sides.add(side.bindNow());
            }
        } catch (RuntimeException e) {
            closeRanks.run();
            throw e;
        }
        PrefillRanks ranks = PrefillRanks.of(sides);
        Scheduler loopScheduler = Schedulers.newSingle("kvflux-prefill");
        PrefillLoop loop = new PrefillLoop(model, settings.steps(), loopScheduler, PrefillLoop.DEFAULT_LAUNCH_AHEAD,
                settings.maxQueuedPrompts, settings.clientShare);
        try {
            RoleFront front = RoleFront.of(settings.auth, meters, settings.unsignedFrom);
            ClientShares shares = new ClientShares(settings.kvBlocks, settings.clientShare);
            shares.register(meters, "kvflux.prefill");
            PrefillCompletions completions = new PrefillCompletions(model, ranks, pair, loop, stats, memories,
                    settings.observations, front, shares, settings.maxModelLen,
                    dev.kvflux.serving.observe.Handover.of(meters, settings.handover));
            DisposableServer http = front.bind(where.host(), where.httpPort(), completions::serve, meters);
            BlockMetrics.register(meters, () -> BlockMetrics.sum(sides.stream().map(PrefillSide::blocks).toList()),
                    sides.stream().mapToInt(PrefillSide::blockCapacity).sum());
            BlockMetrics.registerIncarnation(meters, sides.getFirst().incarnation());
            meters.gauge("kvflux.prefill.transfers.running", "Transfers from their request's arrival until settled"
                    + " (one per link of a request)", sides, all -> all.stream().mapToInt(PrefillSide::running).sum());
            meters.gauge("kvflux.prefill.writes.in.flight", "Writes holding one of the WRITE pipelines' places",
                    pipelines, all -> all.stream().mapToInt(WritePipeline::requestsInFlight).sum());
            meters.gauge("kvflux.prefill.writes.queued", "Writes waiting for one of the WRITE pipelines' places",
                    pipelines, all -> all.stream().mapToInt(WritePipeline::requestsQueued).sum());
            meters.gauge("kvflux.notify.connections.open", "Inbound notify connections open", sides,
                    all -> all.stream().mapToInt(PrefillSide::notifyConnections).sum());
            meters.gauge("kvflux.prefill.decode.sessions.open", "Engine sessions open into decodes' KV regions, one"
                    + " per decode incarnation and rank", sessions,
                    all -> all.stream().mapToInt(HandshakeSessions::openSessions).sum());
            EngineMeters.register(meters, settings.engines);
            List<WaitStrategy> chosen = pipelines.stream().map(WritePipeline::waitStrategy).toList();
            if (settings.kvMode == KvMode.WRITE) {
                WaitChoice.register(meters, chosen);
            }
            PrefillServer server = new PrefillServer(http, ranks, completions, loop, loopScheduler, stats, where.host(),
                    settings.auth, meters, notifyMeters, sessions, memories, history);
            front.identify(Role.PREFILL, server.incarnation(), server.notifyAddress());
            LOG.info("prefill listening: http {}, notify {} ({}), {} mode, {}, policy {}, wait {}, transfer timeout {}"
                    + " ms, engine {}, model {}", Instance.hostPort(server.httpAddress()), server.instance()
                            .notifyRanks().stream().map(Instance::hostPort).toList(),
                    settings.auth == null ? "unsigned" : "signed", settings.kvMode.wireName().toUpperCase(), pair,
                    settings.policy.wireName(), settings.kvMode == KvMode.WRITE ? WaitChoice.names(chosen)
                            : "none (decode reads)", settings.transfer.timeout().toMillis(),
                    engineName(settings.engines.getFirst()), model);
            return server;
        } catch (RuntimeException e) {
            // whatever failed after the notify servers were bound must not leave their ports, connections or threads
            closeRanks.run();
            loop.close();
            loopScheduler.dispose();
            throw new IllegalStateException("cannot start prefill's HTTP server on " + where.host() + ":"
                    + where.httpPort() + ": " + HttpLimits.bindFailure(where.host(), where.httpPort(), e), e);
        }
    }

    private static String engineName(TransferEngine engine) {
        return engine instanceof SimulatedXgmiEngine sim ? engine.backend() + " (copy path " + sim.copyPath() + ")"
                : engine.backend();
    }

    /**
     * Registers with a vLLM-style proxy's ZeroMQ discovery port at {@code proxy} ({@code host:port}): vLLM's own MoRIIO
     * proxy, or kvflux's with {@code --vllm-discovery}, now and every 3 s, as vLLM's connector does; its requests then
     * come in vLLM's shape ({@code kvflux prefill|decode --vllm-proxy}). {@code mode} is the transfer mode it says it
     * runs, which must be this instance's.
     */
    public PrefillServer registerWithVllmProxy(String proxy, dev.kvflux.transfer.KvMode mode) {
        listing.registerWithVllm(proxy, Listing.vllmRegistration(instance(), ranks.ranks().size(), mode),
                dev.kvflux.serving.vllm.VllmPinger.INTERVAL);
        return this;
    }

    /** Registers with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    public PrefillServer pingProxy(String proxyBaseUrl, Duration interval) {
        listing.pingProxy(proxyBaseUrl, instance(), interval, incarnation());
        return this;
    }

    /**
     * Registers in etcd instead of pinging a proxy: this instance's membership record, under {@code discovery}'s
     * cluster, held with a lease of its TTL and kept alive every third of it, signed with the notify secret when there
     * is one ({@link EtcdRegistration}). Every proxy watching the cluster routes to it; closing the instance revokes
     * the lease, so they drop it at once.
     */
    public PrefillServer registerIn(EtcdDiscovery discovery) {
        listing.registerIn(discovery, instance(), incarnation());
        return this;
    }

    public Instance instance() {
        return new Instance(Role.PREFILL, httpAddress(), notifyAddress(), ranks.ranks().stream()
                .map(r -> InetSocketAddress.createUnresolved(host, r.notifyAddress().getPort())).toList());
    }

    /** This instance's incarnation, new at every start. */
    public long incarnation() {
        return side.incarnation();
    }

    public InetSocketAddress httpAddress() {
        return InetSocketAddress.createUnresolved(host, ((InetSocketAddress) http.address()).getPort());
    }

    public InetSocketAddress notifyAddress() {
        return InetSocketAddress.createUnresolved(host, side.notifyAddress().getPort());
    }

    public PrefillStats stats() {
        return stats;
    }

    /** The KV blocks per state now. */
    public BlockAllocator.Snapshot blocks() {
        return BlockMetrics.sum(ranks.ranks().stream().map(PrefillSide::blocks).toList());
    }

    /** Transfers opened and not yet ended (queued, waiting for decode's block list, writing or settling). */
    public int transfersRunning() {
        return ranks.ranks().stream().mapToInt(PrefillSide::running).sum();
    }

    /** Writes holding one of the WRITE pipeline's places now. */
    public int writesInFlight() {
        return ranks.ranks().stream().mapToInt(r -> r.pipeline().requestsInFlight()).sum();
    }

    /** The notify channel's counters (sends, retries, connections, undeliverable). */
    public MicrometerNotifyRecorder notifyMeters() {
        return notifyMeters;
    }

    /** The registry the role's meters are in ({@link Builder#meterRegistry}). */
    public MeterRegistry meterRegistry() {
        return meters.registry();
    }

    /**
     * Stops serving gracefully, as on SIGTERM: new prompts are refused with 503 ({@code prefill_shutting_down});
     * transfers still running get {@link #DEFAULT_SHUTDOWN_GRACE} (at most the transfer timeout) to finish; each
     * one left is stopped and decode is sent {@code write_failed} with the reason, then what was posted is drained
     * and decode's blocks released (up to 2 s more for those messages). Then registration stops and the ports
     * close. Logs what it did.
     */
    @Override
    public void close() {
        close(DEFAULT_SHUTDOWN_GRACE);
    }

    /** As {@link #close()}, giving running transfers {@code grace} to finish. */
    public void close(Duration grace) {
        listing.dispose();
        completions.closing();
        ranks.close(grace);
        if (history != null) {
            try {
                history.close();
            } catch (java.io.UncheckedIOException e) {
                // the rest must still close: native handles and ports outlive a history that could not be written
                LOG.warn("{}", e.getMessage());
            }
        }
        sessions.forEach(HandshakeSessions::close);
        memories.forEach(RoleMemory::close);
        http.disposeNow();
        loop.close();
        loopScheduler.dispose();
        meters.close();
    }
}
