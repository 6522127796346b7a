package dev.kvflux.serving.role;

import dev.kvflux.serving.config.KvfluxConfig;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.notify.ExpectedTransfers;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyMetrics;
import dev.kvflux.transfer.notify.NotifyServer;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.serving.observe.Step;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.pipeline.LayerWrite;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.pipeline.WriteRequest;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.Kind;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * A simulated prefill instance. For each {@code POST /v1/completions} that came through the proxy it
 * runs the prompt through the {@linkplain PrefillLoop simulated model}; during the prompt's last step
 * each layer's event turns ready in turn, and the layers' copies into decode's blocks (from decode's
 * {@code remote_blocks}) go through the {@link WritePipeline} on the simulated xGMI engine. The HTTP
 * answer (one token) comes when prefill ends; the WRITE's outcome goes to decode's notify address as
 * {@code write_done}, or as {@code write_failed} when the {@link Policy} sends failure notices.
 * A completion that finds {@link #DEFAULT_MAX_QUEUED_PROMPTS} (or the configured number of) prompts already
 * waiting for a prefill step is refused at once with 503, as is one whose prompt needs more KV blocks than
 * are free ({@link BlockAllocator}).
 *
 * <p>A transfer nobody wants any more is stopped at once: decode's {@code abort}, or the cancellation of
 * its HTTP request (the client or the proxy gave up), takes the prompt out of the queue, or stops posting
 * layers and gives the write's place back. Whenever a transfer ends, what it posted is drained, its source
 * blocks are freed and decode is sent {@code release}. The wait for decode's block list is bounded by
 * decode's default receive deadline from the request's arrival. Decode's incarnations are tracked per
 * address: a newer one fails every transfer aimed at the previous one, an older one's block list is
 * rejected. {@link #close()} stops gracefully. {@code GET /metrics} serves the role's meters as Prometheus
 * text ({@link RoleMetrics}): the write, request, abort and block meters ({@link PrefillStats},
 * {@link BlockMetrics}), the notify channel's ({@link NotifyMetrics}) and the gauges
 * {@code kvflux.prefill.transfers.running}, {@code kvflux.prefill.writes.in.flight},
 * {@code kvflux.prefill.writes.queued} and {@code kvflux.notify.connections.open}, and the WRITE pipeline's
 * wait meters ({@code kvflux.wait.*}: duration, detection lag, polls, failures by code, stalls, timeouts;
 * {@code MicrometerWaitRecorder}), all tagged {@code role=prefill}.
 *
 * <p>Every log line about a request carries its transfer id (and trace id) in MDC ({@link LogContext}). With
 * an {@link Builder#observationRegistry ObservationRegistry} that traces, each completion is span
 * {@code kvflux.prefill.request}, continuing the {@code traceparent} header, with children
 * {@code kvflux.prefill.queue} (until the prompt's last prefill step is formed), {@code kvflux.prefill.post}
 * (until every layer is posted), {@code kvflux.prefill.wait} (the completion wait) and
 * {@code kvflux.notify.send} (the outcome to decode, whose frame carries the {@code traceparent}).
 */
public final class PrefillServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PrefillServer.class);
    /** KV blocks per instance by default. */
    public static final int DEFAULT_KV_BLOCKS = 1 << 16;
    /** How long running transfers may take to finish when prefill is stopped, by default. */
    public static final Duration DEFAULT_SHUTDOWN_GRACE = Duration.ofSeconds(10);
    /** How many prompts may wait for a prefill step by default before requests are refused with 503. */
    public static final int DEFAULT_MAX_QUEUED_PROMPTS = PrefillLoop.DEFAULT_MAX_QUEUED;

    private final DisposableServer http;
    private final NotifyServer notify;
    private final NotifyClient client;
    private final PrefillLoop loop;
    private final Scheduler loopScheduler;
    private final PrefillStats stats;
    private final Disposable.Composite writes;
    private final Writer writer;
    private final String host;
    private final NotifyAuth auth;
    private final RoleMetrics meters;
    private Disposable pinger = Disposables.disposed();

    private PrefillServer(DisposableServer http, NotifyServer notify, NotifyClient client, PrefillLoop loop,
            Scheduler loopScheduler, PrefillStats stats, Disposable.Composite writes, Writer writer, String host,
            NotifyAuth auth, RoleMetrics meters) {
        this.meters = meters;
        this.http = http;
        this.notify = notify;
        this.client = client;
        this.loop = loop;
        this.loopScheduler = loopScheduler;
        this.stats = stats;
        this.writes = writes;
        this.writer = writer;
        this.host = host;
        this.auth = auth;
    }

    /** A prefill instance's settings; {@link Builder#start()} binds it. Each setter checks its value. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * What a prefill instance is started with. The model and the engine must be set; everything else has a
     * default: loopback on free ports, {@link Policy#KVFLUX}, the default transfer configuration, outcomes
     * retried towards decode for decode's default receive deadline, unsigned notifications,
     * {@link #DEFAULT_MAX_QUEUED_PROMPTS}, {@link #DEFAULT_KV_BLOCKS} and {@link NotifyLimits#DEFAULTS}.
     */
    public static final class Builder extends RoleSettings<Builder> {
        private Policy policy = Policy.KVFLUX;
        private SimulatedXgmiEngine engine;
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
         * The simulated engine the KV cache is written through. It hears of each prefill step
         * ({@link SimulatedXgmiEngine#prefillStepQueued}), so its copies contend with the forward pass as real
         * copies do.
         */
        public Builder engine(SimulatedXgmiEngine engine) {
            this.engine = Objects.requireNonNull(engine, "engine");
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
         * At most {@code maxQueuedPrompts} prompts wait for a prefill step: a completion beyond that is refused
         * at once with 503 ({@code "type": "overloaded"}, {@code "code": "prefill_queue_full"}) and counted
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
         * Starts the instance. Blocks the calling thread until its ports are bound (up to about 10 s), so it
         * must not be called on a Reactor non-blocking thread (a Netty event loop, {@code Schedulers.parallel()});
         * from a reactive chain, call it on {@code Schedulers.boundedElastic()}.
         *
         * @throws IllegalStateException if the model or the engine is not set, if a port cannot be bound, or at
         *     once, with nothing bound, if called on a non-blocking thread
         */
        public PrefillServer start() {
            if (model == null || engine == null) {
                throw new IllegalStateException("a prefill instance needs a model and an engine; set both");
            }
            return PrefillServer.start(this);
        }
    }

    private static PrefillServer start(Builder settings) {
        RoleAddresses where = settings.where;
        ServingModel model = settings.model;
        Policy policy = settings.policy;
        SimulatedXgmiEngine engine = settings.engine;
        KvfluxConfig.Transfer transfer = settings.transfer;
        Duration notifyWithin = settings.notifyWithin != null ? settings.notifyWithin
                : ExpectedTransfers.defaultDeadline(transfer.timeout());
        NotifyAuth auth = settings.auth;
        int maxQueuedPrompts = settings.maxQueuedPrompts;
        int kvBlocks = settings.kvBlocks;
        NotifyLimits limits = settings.limits;
        Blocking.requireBlockingAllowed("PrefillServer.start");
        LogContext.enable();
        Duration transferTimeout = transfer.timeout();
        RoleMetrics meters = RoleMetrics.of(settings.meterRegistry, "prefill");
        NotifyMetrics metrics = new NotifyMetrics(meters.registry(), meters.tags());
        RemoteBlockBoard board = new RemoteBlockBoard(limits.peerBudgetBytes(), RemoteBlockBoard.DEFAULT_CAPACITY,
                metrics);
        BlockAllocator blocks = new BlockAllocator("prefill", kvBlocks, System::nanoTime);
        PrefillTransfers transfers = new PrefillTransfers();
        // the writer needs the engine session made after the notify port is bound; messages that come before
        // it exists go to the board
        Writer[] handler = new Writer[1];
        NotifyServer notify = NotifyServer.builder().host(where.host()).port(where.notifyPort())
                .accepts("remote_blocks", "abort").limits(limits)
                .metrics(metrics).auth(auth).handler(message -> {
                    Writer writer = handler[0];
                    if (writer != null) {
                        writer.accept(message);
                    } else {
                        board.accept(message);
                    }
                }).bind().block(Duration.ofSeconds(10));
        NotifyClient client = NotifyClient.builder().metrics(metrics).auth(auth).build();
        Scheduler loopScheduler = Schedulers.newSingle("kvflux-prefill");
        PrefillLoop loop = new PrefillLoop(model, engine, loopScheduler, PrefillLoop.DEFAULT_LAUNCH_AHEAD,
                maxQueuedPrompts);
        try {
            // the layout is fixed (as decode's), so prefill and decode may use different numbers of blocks
            KvCache cache = new KvCache(model, KvCache.ROW_BLOCKS);
            MemoryRegion local = engine.registerMemory(cache.regionBytes(), 0);
            MemoryRegion remote = new MemoryRegion("decode", 0, cache.regionBytes(), 1);
            PrefillStats stats = new PrefillStats(meters);
            Disposable.Composite writes = Disposables.composite();
            Writer writer = new Writer(model, policy, cache, blocks, transfers, board,
                    engine.createSession(local, remote), policy.writePipeline(engine, transfer,
                            MicrometerWaitRecorder.of(meters.registry(), meters.tags()).histograms(true)),
                    client, notifyWithin, transferTimeout, stats, writes, Incarnation.next(), settings.observations);
            handler[0] = writer;
            DisposableServer http;
            try {
                http = HttpLimits.server(where.host(), where.httpPort())
                        .route(routes -> routes.post("/v1/completions", (req, res) -> writer.completions(req, res, loop))
                                .get("/health", (req, res) -> res.sendString(Mono.just("{\"status\":\"ok\"}")))
                                .get("/metrics", (req, res) -> meters.serve(res)))
                        .bindNow();
            } catch (RuntimeException e) {
                throw new IllegalStateException("cannot start prefill's HTTP server on " + where.host() + ":"
                        + where.httpPort() + ": " + HttpLimits.bindFailure(where.host(), where.httpPort(), e), e);
            }
            BlockMetrics.register(meters, blocks);
            BlockMetrics.registerIncarnation(meters, writer.incarnation);
            meters.gauge("kvflux.prefill.transfers.running", "Transfers from their request's arrival until settled",
                    transfers, PrefillTransfers::size);
            meters.gauge("kvflux.prefill.writes.in.flight", "Writes holding one of the WRITE pipeline's places",
                    writer.pipeline, WritePipeline::requestsInFlight);
            meters.gauge("kvflux.prefill.writes.queued", "Writes waiting for one of the WRITE pipeline's places",
                    writer.pipeline, WritePipeline::requestsQueued);
            meters.gauge("kvflux.notify.connections.open", "Inbound notify connections open", notify,
                    NotifyServer::openConnections);
            PrefillServer server = new PrefillServer(http, notify, client, loop, loopScheduler, stats, writes, writer,
                    where.host(), auth, meters);
            LOG.info("prefill listening: http {}, notify {} ({}), policy {}, transfer timeout {} ms, copy path {},"
                    + " model {}", Instance.hostPort(server.httpAddress()), Instance.hostPort(server.notifyAddress()),
                    auth == null ? "unsigned" : "signed", policy.wireName(), transferTimeout.toMillis(),
                    engine.copyPath(), model);
            return server;
        } catch (RuntimeException e) {
            // whatever failed after the notify server was bound must not leave its port, connections or thread
            notify.close();
            client.close();
            loop.close();
            loopScheduler.dispose();
            throw e;
        }
    }

    /** Registers with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    public PrefillServer pingProxy(String proxyBaseUrl, Duration interval) {
        pinger.dispose();
        pinger = InstancePinger.start(proxyBaseUrl, instance(), interval, auth, incarnation());
        return this;
    }

    public Instance instance() {
        return new Instance(Role.PREFILL, httpAddress(), notifyAddress());
    }

    /** This instance's incarnation, new at every start. */
    public long incarnation() {
        return writer.incarnation;
    }

    public InetSocketAddress httpAddress() {
        return InetSocketAddress.createUnresolved(host, ((InetSocketAddress) http.address()).getPort());
    }

    public InetSocketAddress notifyAddress() {
        return InetSocketAddress.createUnresolved(host, notify.address().getPort());
    }

    public PrefillStats stats() {
        return stats;
    }

    /** Blocks per state, for tests and the chaos run. */
    BlockAllocator.Snapshot blocks() {
        return writer.blocks.snapshot();
    }

    /** Writes holding one of the WRITE pipeline's places now. */
    int writesInFlight() {
        return writer.pipeline.requestsInFlight();
    }

    /** The registry the role's meters are in ({@link Builder#meterRegistry}). */
    public MeterRegistry meterRegistry() {
        return meters.registry();
    }

    /** The notify channel's counters (sends, retries, undeliverable). */
    public NotifyMetrics notifyMetrics() {
        return client.metrics();
    }

    /**
     * Stops serving gracefully, as on SIGTERM: new prompts are refused with 503 ({@code
     * prefill_shutting_down}); transfers still running get {@link #DEFAULT_SHUTDOWN_GRACE} (at most the transfer
     * timeout) to finish; each one left is stopped and decode is sent {@code write_failed} with the reason,
     * then what was posted is drained and decode's blocks released (up to 2 s more for those messages). Then
     * registration stops and the ports close. Logs what it did.
     */
    @Override
    public void close() {
        close(DEFAULT_SHUTDOWN_GRACE);
    }

    /** As {@link #close()}, giving running transfers {@code grace} to finish. */
    public void close(Duration grace) {
        pinger.dispose();
        writer.shutDown(grace);
        writes.dispose();
        http.disposeNow();
        notify.close();
        client.close();
        loop.close();
        loopScheduler.dispose();
        meters.close();
    }

    /**
     * Serves completions and runs their writes. HTTP handlers run on Netty's event loops, {@link #abort}
     * on the notify server's, {@link #startWrite} on the prefill loop's worker, outcomes and drains on
     * the pipeline's and the wait's schedulers; shared state is in {@link PrefillTransfers} and
     * {@link BlockAllocator}, both thread-safe.
     */
    private static final class Writer {
        private final ServingModel model;
        private final Policy policy;
        private final KvCache cache;
        private final BlockAllocator blocks;
        private final PrefillTransfers transfers;
        private final RemoteBlockBoard board;
        private final TransferSession session;
        private final WritePipeline pipeline;
        private final NotifyClient client;
        private final Duration notifyWithin;
        private final Duration transferTimeout;
        private final Duration deadline;
        private final PrefillStats stats;
        private final Disposable.Composite writes;
        private final long incarnation;
        private final ObservationRegistry observations;
        private volatile boolean closing;
        /** Transfers ended whose drain, free and release are still to come. */
        private final java.util.concurrent.atomic.AtomicInteger settling = new java.util.concurrent.atomic.AtomicInteger();
        /** Messages to decode still being sent (write_done, write_failed, release). */
        private final java.util.concurrent.atomic.AtomicInteger sending = new java.util.concurrent.atomic.AtomicInteger();
        /** The newest incarnation seen of each decode notify address. */
        private final java.util.Map<InetSocketAddress, Long> decodeIncarnations =
                new java.util.concurrent.ConcurrentHashMap<>();
        /** Incarnations of block lists that came before their request (bounded). */
        private final java.util.Map<String, Long> earlyIncarnations = java.util.Collections.synchronizedMap(
                new java.util.LinkedHashMap<>(16, 0.75f, false) {
                    @Override
                    protected boolean removeEldestEntry(java.util.Map.Entry<String, Long> eldest) {
                        return size() > RemoteBlockBoard.DEFAULT_CAPACITY;
                    }
                });

        Writer(ServingModel model, Policy policy, KvCache cache, BlockAllocator blocks, PrefillTransfers transfers,
                RemoteBlockBoard board, TransferSession session, WritePipeline pipeline, NotifyClient client,
                Duration notifyWithin, Duration transferTimeout, PrefillStats stats, Disposable.Composite writes,
                long incarnation, ObservationRegistry observations) {
            this.incarnation = incarnation;
            this.observations = observations;
            this.model = model;
            this.policy = policy;
            this.cache = cache;
            this.blocks = blocks;
            this.transfers = transfers;
            this.board = board;
            this.session = session;
            this.pipeline = pipeline;
            this.client = client;
            this.notifyWithin = notifyWithin;
            this.transferTimeout = transferTimeout;
            this.deadline = ExpectedTransfers.defaultDeadline(transferTimeout);
            this.stats = stats;
            this.writes = writes;
        }

        /**
         * The notify server's handler: {@code abort} stops a transfer; {@code remote_blocks} from a decode's
         * newer incarnation fails every transfer aimed at its previous one, and one from an older incarnation
         * is rejected and counted; everything else goes to the board.
         */
        void accept(NotifyMessage message) {
            try (LogContext.Scope scope = LogContext.open(message.transferId(), traceId(message.transferId()))) {
                handle(message);
            }
        }

        /** The trace id of a running transfer, for its log lines; null when it is not traced or not known. */
        private String traceId(String transferId) {
            PrefillTransfers.Transfer t = transfers.get(transferId);
            return t == null ? null : t.traceId;
        }

        private void handle(NotifyMessage message) {
            if (message instanceof NotifyMessage.Abort abort) {
                PrefillTransfers.Transfer t = transfers.get(abort.transferId());
                if (t != null && abort.incarnation() != 0 && t.decodeIncarnation != 0
                        && abort.incarnation() != t.decodeIncarnation) {
                    stale(abort.type(), abort.transferId(), abort.incarnation(), t.decodeIncarnation);
                    return;
                }
                // the reason is a peer's text: escaped, and cut so that fenced ids stay small
                abort(abort.transferId(), "decode aborted it: " + LogText.escape(abort.reason()));
            } else if (message instanceof NotifyMessage.RemoteBlocks blocks && blocks.incarnation() != 0) {
                PrefillTransfers.Transfer t = transfers.get(blocks.transferId());
                if (t == null) {
                    earlyIncarnations.put(blocks.transferId(), blocks.incarnation());
                } else if (!learned(t, blocks.incarnation())) {
                    return;
                }
                board.accept(message);
            } else {
                board.accept(message);
            }
        }

        private void stale(String type, String id, long from, long current) {
            stats.staleIncarnation.increment();
            LOG.warn("transfer {}: rejected {} from decode incarnation {}, not the current {} (a message from"
                    + " before a restart)", id, type, from, current);
        }

        /**
         * Decode incarnation {@code incarnation} sent the transfer's block list. A newer incarnation than the
         * one known at that address means decode restarted: every running transfer aimed at its previous
         * incarnation (or that came before the restart and has no block list yet) fails at once, freeing
         * everything; an older one is rejected.
         *
         * @return false if the block list is stale and must not be used
         */
        private boolean learned(PrefillTransfers.Transfer t, long incarnation) {
            long known = decodeIncarnations.getOrDefault(t.decode, 0L);
            if (incarnation < known) {
                stale("remote_blocks", t.id, incarnation, known);
                abort(t.id, "its block list came from a previous incarnation of decode " + Instance.hostPort(t.decode));
                return false;
            }
            t.decodeIncarnation = incarnation;
            if (known == 0 && decodeIncarnations.size() >= Incarnation.MAX_PEERS_TRACKED) {
                return true; // peers come from requests: past the bound, a new one is used without restart tracking
            }
            if (incarnation > known && decodeIncarnations.merge(t.decode, incarnation, Math::max) == incarnation
                    && known != 0) {
                decodeRestarted(t.decode, known, incarnation);
            }
            return true;
        }

        private void decodeRestarted(InetSocketAddress decode, long previous, long current) {
            long startedAt = Incarnation.startMillis(current);
            int failed = 0;
            for (PrefillTransfers.Transfer other : transfers.running()) {
                if (!other.decode.equals(decode)) {
                    continue;
                }
                boolean old = other.decodeIncarnation != 0 ? other.decodeIncarnation < current
                        : other.arrivalMillis < startedAt;
                if (old) {
                    other.releaseDecode = false;
                    if (other.abort("decode " + Instance.hostPort(decode) + " restarted (incarnation " + previous
                            + " -> " + current + "); its previous incarnation's blocks are gone")) {
                        stats.failedOnDecodeRestart.increment();
                        settle(other);
                        failed++;
                    }
                }
            }
            LOG.warn("decode {} restarted (incarnation {} -> {}): failed {} transfers aimed at its previous"
                    + " incarnation and freed their blocks", Instance.hostPort(decode), previous, current, failed);
        }

        /**
         * Stops the transfer: its queued prompt leaves the prefill queue, no further layer is posted, its
         * write's place is given back, and once what was posted is terminal its blocks are freed and
         * decode gets {@code release}. An abort for a transfer not seen yet fences its id.
         */
        void abort(String id, String reason) {
            PrefillTransfers.Transfer t = transfers.get(id);
            try (LogContext.Scope scope = LogContext.open(id, t == null ? null : t.traceId)) {
                abort(id, reason, t);
            }
        }

        private void abort(String id, String reason, PrefillTransfers.Transfer t) {
            if (t == null) {
                transfers.fence(id, "was aborted (" + reason + ")");
                stats.abortsForUnknown.increment();
                LOG.debug("transfer {}: abort for a transfer prefill has not seen or has finished: {}",
                        LogText.escape(id), reason);
                return;
            }
            if (t.abort(reason)) {
                stats.aborted.increment();
                LOG.info("transfer {}: aborted ({}); {}", LogText.escape(id), reason,
                        t.wrote() ? "its write is stopped and what was posted is drained" : "its prompt leaves the queue");
                settle(t);
            }
        }

        Publisher<Void> completions(HttpServerRequest request, HttpServerResponse response, PrefillLoop loop) {
            return HttpJson.withBody(request, response, body -> {
                CompletionRequest parsed;
                try {
                    parsed = CompletionRequest.parse(HttpJson.object(body), Role.PREFILL);
                } catch (IllegalArgumentException e) {
                    return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST,
                            "invalid_request_error", "bad_request", e.getMessage()));
                }
                String id = parsed.params().transferId();
                Observation span = Spans.server(observations, "kvflux.prefill.request", id, request.requestHeaders());
                String traceId = Spans.traceId(span);
                try (LogContext.Scope scope = LogContext.open(id, traceId)) {
                    return admit(parsed, span, traceId, response, loop)
                            .doOnError(span::error)
                            .doFinally(signal -> span.stop())
                            .contextWrite(LogContext.context(id, traceId));
                }
            });
        }

        /** Takes the request in, or refuses it at once; the request's answer. */
        private Mono<Void> admit(CompletionRequest parsed, Observation span, String traceId,
                HttpServerResponse response, PrefillLoop loop) {
            String id = parsed.params().transferId();
            if (closing) {
                return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                        "prefill_shutting_down", "prefill is shutting down and takes no new prompts; retry on"
                                + " another prefill instance"));
            }
            PrefillTransfers.Transfer t;
            try {
                t = transfers.open(id, parsed.params().remoteNotify(),
                        System.nanoTime() + deadline.toNanos());
            } catch (PrefillTransfers.FencedException e) {
                stats.refusedFenced.increment();
                return Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT, "invalid_request_error",
                        "transfer_fenced", e.getMessage()));
            }
            t.span = span;
            t.traceId = traceId;
            Long early = earlyIncarnations.remove(id);
            if (early != null && !learned(t, early)) {
                return Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT, "kv_transfer_aborted",
                        "transfer_aborted", "transfer " + id + "'s block list came from a previous incarnation of"
                                + " decode"));
            }
            try {
                t.localBlocks(blocks.allocate(id, model.blocksFor(parsed.promptTokens())));
            } catch (BlockAllocator.OutOfBlocksException e) {
                stats.refusedOutOfBlocks.increment();
                settle(t);
                return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                        "kv_blocks_exhausted", e.getMessage()));
            }
            Mono<Void> prefilled;
            try {
                t.queueStep = Step.of(Spans.child(observations, "kvflux.prefill.queue", id, span));
                prefilled = loop.submit(parsed.promptTokens(), (startsIn, length) -> startWrite(t, startsIn, length));
            } catch (PrefillLoop.QueueFullException e) {
                stats.refusedQueueFull.increment();
                settle(t);
                return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                        "prefill_queue_full", e.getMessage()));
            }
            stats.requests.increment();
            // Whichever comes first: the prompt's last step ends, or the transfer is aborted (which
            // cancels the prompt). The request's own cancellation (client or proxy gone) aborts it.
            return Mono.firstWithSignal(prefilled.thenReturn(""), t.aborted())
                    .doOnCancel(() -> abort(id, "prefill's HTTP request was cancelled: the client or the proxy"
                            + " gave up"))
                    .doOnError(e -> abort(id, "prefill could not start its write: " + e.getMessage()))
                    .flatMap(aborted -> aborted.isEmpty()
                            ? Mono.from(HttpJson.reply(response, HttpResponseStatus.OK, firstToken(parsed)))
                            : Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT, "kv_transfer_aborted",
                                    "transfer_aborted", "transfer " + id + " was aborted: " + aborted)));
        }

        /** Called when the prompt's last prefill step is queued: its layers finish across the step. */
        private void startWrite(PrefillTransfers.Transfer t, Duration startsIn, Duration stepLength) {
            t.queueStep.stop();
            try (LogContext.Scope scope = LogContext.open(t.id, t.traceId)) {
                write(t, startsIn, stepLength);
            }
        }

        /** Starts the transfer's write on the prefill loop's worker, unless it is past its deadline or aborted. */
        private void write(PrefillTransfers.Transfer t, Duration startsIn, Duration stepLength) {
            if (System.nanoTime() - t.deadlineNanos > 0) {
                // decode has given up on it by now and may reuse its blocks once its lease passes: post nothing
                stats.pastDeadline.increment();
                abort(t.id, "its prompt finished prefilling after the transfer's deadline (" + deadline.toMillis()
                        + " ms after the request came), when decode has given up on it");
                return;
            }
            if (!t.startWriting()) {
                return;
            }
            String id = t.id;
            blocks.writing(id);
            List<Long> localBlocks = t.localBlocks();
            int layers = model.layers();
            SimulatedLayerEvent[] events = new SimulatedLayerEvent[layers];
            for (int l = 0; l < layers; l++) {
                events[l] = SimulatedLayerEvent.readyAfter(Schedulers.parallel(),
                        startsIn.plus(stepLength.multipliedBy(l + 1).dividedBy(layers)));
            }
            Duration left = Duration.ofNanos(Math.max(1_000_000, t.deadlineNanos - System.nanoTime()));
            Flux<LayerWrite> layerWrites = board.blocks(id)
                    .timeout(left, Mono.error(() -> new IllegalStateException("decode's block list for " + id
                            + " did not arrive by the transfer's deadline (" + deadline.toMillis() + " ms after the"
                            + " request came, when decode gives up); decode is gone, slow, or cannot reach prefill's"
                            + " notify port")))
                    .flatMapMany(remoteBlocks -> {
                        t.decodeBlocksWritten = List.copyOf(
                                remoteBlocks.subList(0, Math.min(localBlocks.size(), remoteBlocks.size())));
                        return Flux.range(0, layers)
                                .map(l -> new LayerWrite(l, events[l], cache.layerPlan(l, localBlocks, remoteBlocks)));
                    });
            t.postStep = Step.of(Spans.child(observations, "kvflux.prefill.post", id, t.span));
            java.util.concurrent.atomic.AtomicInteger posted = new java.util.concurrent.atomic.AtomicInteger();
            Runnable afterPost = () -> {
                if (posted.incrementAndGet() == layers) {
                    t.postStep.stop();
                    t.waitStep = Step.of(Spans.child(observations, "kvflux.prefill.wait", id, t.span));
                }
            };
            Disposable[] self = new Disposable[1];
            self[0] = pipeline.write(new WriteRequest(id, t.recording(session, afterPost), layerWrites))
                    .doFinally(signal -> {
                        if (self[0] != null) {
                            writes.remove(self[0]);
                        }
                    })
                    .contextWrite(LogContext.context(id, t.traceId))
                    .subscribe(outcome -> {
                        try (LogContext.Scope scope = LogContext.open(id, t.traceId)) {
                            finish(outcome, t);
                            settle(t);
                        }
                    });
            if (!self[0].isDisposed()) {
                writes.add(self[0]);
                t.writing(self[0]);
            }
        }

        /**
         * Ends the transfer once: waits until nothing it posted is in flight (the drain wait, bounded by the
         * transfer timeout), frees its source blocks and sends decode {@code release}. When copies are still
         * in flight at the timeout (they stalled), the source blocks are freed anyway, counted, and decode is
         * sent no release: its lease reclaims its blocks.
         */
        private void settle(PrefillTransfers.Transfer t) {
            List<TransferStatus> posted = t.end();
            if (posted == null) {
                return;
            }
            t.queueStep.stop();
            t.postStep.stop();
            t.waitStep.stop();
            settling.incrementAndGet();
            CompletionWait.drain(transferTimeout).await(posted)
                    .then(Mono.fromRunnable(() -> released(t)))
                    .onErrorResume(e -> {
                        // a failure wins over the timeout in the drain's error, so ask the statuses themselves
                        if (e instanceof TransferException te && te.code() == StatusCode.IN_PROGRESS
                                || stillInFlight(posted)) {
                            stats.stalledAtRelease.increment();
                            blocks.forceFree(t.id);
                            try (LogContext.Scope scope = LogContext.open(t.id, t.traceId)) {
                                LOG.warn("transfer {}: copies still in flight {} ms after it ended; its source blocks are"
                                    + " freed anyway and decode is sent no release (its lease reclaims its blocks)",
                                    t.id, transferTimeout.toMillis());
                            }
                        } else {
                            released(t);
                        }
                        return Mono.empty();
                    })
                    .doFinally(signal -> settling.decrementAndGet())
                    .contextWrite(LogContext.context(t.id, t.traceId))
                    .subscribe();
        }

        /** Whether any status may still be in flight; one that cannot be queried counts as in flight. */
        private static boolean stillInFlight(List<TransferStatus> posted) {
            for (TransferStatus status : posted) {
                try {
                    if (!status.code().isTerminal()) {
                        return true;
                    }
                } catch (RuntimeException broken) {
                    return true;
                }
            }
            return false;
        }

        /**
         * Stops taking prompts, waits up to {@code grace} (at most the transfer timeout) for running transfers,
         * then stops each one left, tells its decode {@code write_failed} with the reason, and waits up to 2 s
         * more for the drains and messages. Blocks the calling thread.
         */
        void shutDown(Duration grace) {
            closing = true;
            long start = System.nanoTime();
            Duration bounded = grace.compareTo(transferTimeout) < 0 ? grace : transferTimeout;
            int running = transfers.size();
            waitUntil(() -> transfers.size() == 0, bounded);
            int finished = running - transfers.size();
            int stopped = 0;
            for (PrefillTransfers.Transfer t : transfers.running()) {
                String reason = "prefill is shutting down; the KV of transfer " + t.id + " was not written within"
                        + " the shutdown grace of " + bounded.toMillis() + " ms; retry the request";
                if (t.abort(reason)) {
                    stopped++;
                    stats.recordWrite(false, StatusCode.ERR_BAD_STATE, sinceArrival(t));
                    sendOutcome(t, new NotifyMessage.WriteFailed(t.id, StatusCode.ERR_BAD_STATE, reason, incarnation,
                            t.decodeIncarnation));
                    settle(t);
                }
            }
            waitUntil(() -> transfers.size() == 0 && settling.get() == 0 && sending.get() == 0, Duration.ofSeconds(2));
            LOG.info("prefill stopping: {} running transfers finished within {} ms, {} stopped with write_failed"
                    + " (\"prefill is shutting down\"), {} not settled, {} messages to decode not confirmed;"
                    + " registration stopped", finished, (System.nanoTime() - start) / 1_000_000, stopped,
                    transfers.size(), sending.get());
        }

        private static void waitUntil(java.util.function.BooleanSupplier done, Duration within) {
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

        /**
         * Sends the transfer's outcome to decode as span {@code kvflux.notify.send}, whose trace context the
         * message carries when the transfer is traced.
         */
        private void sendOutcome(PrefillTransfers.Transfer t, NotifyMessage outcome) {
            Observation notice = Spans.sent(observations, "kvflux.notify.send", t.id, t.span, Kind.PRODUCER);
            send(t, outcome.withTraceparent(Spans.traceparent(notice)), notice);
        }

        /**
         * Sends a message about {@code t} to its decode, counted in {@link #sending} until acknowledged or given
         * up; {@code span} ends then.
         */
        private void send(PrefillTransfers.Transfer t, NotifyMessage message, Observation span) {
            sending.incrementAndGet();
            client.send(t.decode, message, notifyWithin)
                    .doFinally(signal -> {
                        sending.decrementAndGet();
                        span.stop();
                    })
                    .contextWrite(LogContext.context(t.id, t.traceId))
                    .subscribe();
        }

        private void released(PrefillTransfers.Transfer t) {
            blocks.free(t.id);
            if (t.decode != null && t.releaseDecode) {
                stats.releasesSent.increment();
                send(t, new NotifyMessage.Release(t.id, incarnation, t.decodeIncarnation), Observation.NOOP);
            }
        }

        private void finish(WriteOutcome outcome, PrefillTransfers.Transfer t) {
            if (outcome instanceof WriteOutcome.WriteFailed failed) {
                t.postStep.stop();
                t.waitStep.fail(new IllegalStateException(failed.code().qualifiedName() + ": " + failed.reason()));
                stats.recordWrite(false, failed.code(), sinceArrival(t));
                LOG.warn("transfer {}: MoRIIO batch wait failed ({}): {}{}", failed.transferId(),
                        failed.code().qualifiedName(), failed.reason(),
                        policy.failureNotice() ? "" : "; decode is not told (policy " + policy.wireName() + ")");
                if (!policy.failureNotice()) {
                    stats.failuresNotNotified.increment();
                    return;
                }
            } else {
                t.waitStep.stop();
                stats.recordWrite(true, StatusCode.SUCCESS, sinceArrival(t));
            }
            long checksum = outcome instanceof WriteOutcome.WriteDone
                    ? KvChecksum.of(t.id, model.layers(), t.decodeBlocksWritten) : 0;
            sendOutcome(t, NotifyMessage.of(outcome, incarnation, t.decodeIncarnation, checksum));
        }

        /** How long ago the transfer's request arrived (its deadline is the receive deadline after that). */
        private Duration sinceArrival(PrefillTransfers.Transfer t) {
            return Duration.ofNanos(System.nanoTime() - (t.deadlineNanos - deadline.toNanos()));
        }

        private static ObjectNode firstToken(CompletionRequest request) {
            ObjectNode body = HttpJson.MAPPER.createObjectNode()
                    .put("id", "cmpl-" + request.params().transferId()).put("object", "text_completion");
            body.putArray("choices").addObject().put("index", 0).put("text", " t0").put("finish_reason", "length");
            body.putObject("usage").put("prompt_tokens", request.promptTokens()).put("completion_tokens", 1)
                    .put("total_tokens", request.promptTokens() + 1);
            return body;
        }
    }
}
