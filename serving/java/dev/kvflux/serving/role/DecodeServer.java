package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.notify.ExpectedTransfers;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyMetrics;
import dev.kvflux.transfer.notify.NotifyServer;
import dev.kvflux.transfer.notify.ReceiveDeadlineException;
import dev.kvflux.transfer.notify.RemoteWriteFailedException;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * A simulated decode instance. For each {@code POST /v1/completions} that came through the proxy it
 * expects the request's transfer, sends prefill the blocks it allocated ({@code remote_blocks}), waits for
 * {@code write_done}, then decodes {@code max_tokens} tokens, one per decode step, streamed as
 * server-sent events when {@code stream} is true.
 *
 * <p>When prefill reports {@code write_failed}, the request fails with 503 and an OpenAI-style error
 * naming prefill's code and reason; when the receive deadline passes first, with 504; a request whose
 * transfer id is already in use, with 409. With a receive deadline, {@code remote_blocks} is retried for
 * half of it (prefill needs the rest to write and notify); if it cannot be delivered by then the request
 * fails at once with 503 ({@code REMOTE_BLOCKS_UNDELIVERABLE}) rather than waiting out the deadline for a
 * KV that prefill was never told where to write. Without a receive deadline (vLLM's behaviour before
 * kvflux) an undeliverable {@code remote_blocks} is only counted and logged, and a request whose notice
 * never comes waits until its client gives up.
 *
 * <p>A request's KV blocks come from a {@link BlockAllocator} (none free: 503 {@code kv_blocks_exhausted}
 * at once). When a request ends, its blocks stay QUARANTINED until prefill's {@code release} or the block
 * lease, and prefill is told {@code abort} unless it already said how the write ended (deadline, client
 * gone, out of blocks, shutting down). Notices about another incarnation's blocks, or from an older
 * prefill incarnation, are rejected and counted; a newer prefill incarnation fails the requests waiting on
 * the previous one. {@code write_done}'s checksum is verified against the granted blocks. {@link #close()}
 * fails waiting requests with a reason and tells prefill. {@code GET /health} answers 200;
 * {@code GET /metrics} serves the role's meters as Prometheus text ({@link RoleMetrics}), all tagged
 * {@code role=decode}: the notify channel's ({@link NotifyMetrics}), the block meters ({@link BlockMetrics}),
 * the timer {@code kvflux.decode.kv.wait} from a request's arrival to the end of its wait for the KV (tag
 * {@code outcome}: write_done, write_failed, deadline, undeliverable, prefill_restarted, shutting_down,
 * duplicate, error, cancelled), the gauges {@code kvflux.decode.requests.running} and
 * {@code kvflux.notify.connections.open}, and the counters of {@link DecodeStats}.
 *
 * <p>Every log line about a request carries its transfer id (and trace id) in MDC ({@link LogContext}). With
 * an {@link Builder#observationRegistry ObservationRegistry} that traces, each completion is span
 * {@code kvflux.decode.request}, continuing the {@code traceparent} header, with children
 * {@code kvflux.decode.receive} (waiting for the KV's notice) and {@code kvflux.decode.generate} (decoding);
 * a notice that carries a traceparent is span {@code kvflux.notify.receive}, a child of prefill's
 * {@code kvflux.notify.send}.
 */
public final class DecodeServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeServer.class);
    /** KV blocks per instance by default. */
    public static final int DEFAULT_KV_BLOCKS = 1 << 16;
    /** The most releases kept for requests decode has not seen yet. */
    private static final int EARLY_RELEASES = 4096;
    /** How long blocks whose prefill never said release stay quarantined by default: 2 × the default transfer timeout. */
    public static final Duration DEFAULT_BLOCK_LEASE = Duration.ofSeconds(60);
    /** The shortest time an abort is retried towards prefill. */
    private static final Duration ABORT_AT_LEAST_WITHIN = Duration.ofSeconds(5);
    /** How long close() waits for the aborts it sends to prefill. */
    private static final Duration ABORTS_ON_CLOSE_WITHIN = Duration.ofSeconds(2);
    /** How long remote_blocks is retried without a receive deadline (as long as prefill's defer timeout). */
    private static final Duration LEGACY_BLOCKS_WITHIN = Duration.ofSeconds(60);

    private final DisposableServer http;
    private final NotifyServer notify;
    private final NotifyClient client;
    private final ExpectedTransfers expected;
    private final Handler handler;
    private final Disposable reaper;
    private final String host;
    private final NotifyAuth auth;
    private final RoleMetrics meters;
    private Disposable pinger = reactor.core.Disposables.disposed();

    private DecodeServer(DisposableServer http, NotifyServer notify, NotifyClient client, ExpectedTransfers expected,
            Handler handler, Disposable reaper, String host, NotifyAuth auth, RoleMetrics meters) {
        this.meters = meters;
        this.http = http;
        this.notify = notify;
        this.client = client;
        this.expected = expected;
        this.handler = handler;
        this.reaper = reaper;
        this.host = host;
        this.auth = auth;
    }

    /** A decode instance's settings; {@link Builder#start()} binds it. Each setter checks its value. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * What a decode instance is started with. The model must be set; everything else has a default:
     * loopback on free ports, no receive deadline, unsigned notifications, {@link #DEFAULT_KV_BLOCKS},
     * {@link #DEFAULT_BLOCK_LEASE} and {@link NotifyLimits#DEFAULTS}.
     */
    public static final class Builder extends RoleSettings<Builder> {
        private Duration receiveDeadline;
        private Duration blockLease = DEFAULT_BLOCK_LEASE;

        private Builder() {
            super(DEFAULT_KV_BLOCKS);
        }

        /** How long a request waits for its transfer's notice; {@code null} for no deadline. */
        public Builder receiveDeadline(Duration receiveDeadline) {
            if (receiveDeadline != null && (receiveDeadline.isZero() || receiveDeadline.isNegative())) {
                throw new IllegalArgumentException("the receive deadline must be positive, got " + receiveDeadline);
            }
            this.receiveDeadline = receiveDeadline;
            return this;
        }

        /**
         * The block lease: the blocks of a request that has ended stay QUARANTINED until prefill says
         * {@code release} or, when it never does (prefill is gone), until {@code blockLease} after the later
         * of the request's end and its receive deadline.
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
         * Starts the instance. Blocks the calling thread until its ports are bound (up to about 10 s), so it
         * must not be called on a Reactor non-blocking thread (a Netty event loop, {@code Schedulers.parallel()});
         * from a reactive chain, call it on {@code Schedulers.boundedElastic()}.
         *
         * @throws IllegalStateException if the model is not set, if a port cannot be bound, or at once, with
         *     nothing bound, if called on a non-blocking thread
         */
        public DecodeServer start() {
            if (model == null) {
                throw new IllegalStateException("a decode instance needs a model; set it");
            }
            return DecodeServer.start(this);
        }
    }

    private static DecodeServer start(Builder settings) {
        RoleAddresses where = settings.where;
        ServingModel model = settings.model;
        Duration receiveDeadline = settings.receiveDeadline;
        NotifyAuth auth = settings.auth;
        int kvBlocks = settings.kvBlocks;
        Duration blockLease = settings.blockLease;
        NotifyLimits limits = settings.limits;
        Blocking.requireBlockingAllowed("DecodeServer.start");
        RoleMetrics meters = RoleMetrics.of(settings.meterRegistry, "decode");
        NotifyMetrics metrics = new NotifyMetrics(meters.registry(), meters.tags());
        LogContext.enable();
        ExpectedTransfers expected = (receiveDeadline == null
                ? ExpectedTransfers.withoutDeadline()
                : ExpectedTransfers.withDeadline(receiveDeadline)).metrics(metrics)
                .earlyBudget(limits.peerBudgetBytes());
        BlockAllocator blocks = new BlockAllocator("decode", kvBlocks, System::nanoTime);
        NotifyClient client = NotifyClient.builder().metrics(metrics).auth(auth).build();
        Handler handler = new Handler(model, expected, client, blocks, blockLease,
                receiveDeadline != null ? receiveDeadline.dividedBy(2) : LEGACY_BLOCKS_WITHIN, receiveDeadline != null,
                receiveDeadline, new DecodeStats(meters), new ConcurrentHashMap<>(), new AtomicBoolean(), Incarnation.next(),
                new ConcurrentHashMap<>(), new EarlyReleases(EARLY_RELEASES, blockLease.toNanos(), System::nanoTime),
                settings.observations);
        NotifyServer notify;
        try {
            notify = NotifyServer.builder().host(where.host()).port(where.notifyPort())
                    .accepts("write_done", "write_failed", "release").limits(limits)
                    .metrics(metrics).auth(auth).handler(handler::accept).bind().block(Duration.ofSeconds(10));
        } catch (RuntimeException e) {
            client.close();
            throw e;
        }
        Duration reapEvery = blockLease.dividedBy(8).compareTo(Duration.ofSeconds(1)) > 0 ? Duration.ofSeconds(1)
                : blockLease.dividedBy(8).isZero() ? Duration.ofMillis(1) : blockLease.dividedBy(8);
        Disposable reaper = Flux.interval(reapEvery, Schedulers.parallel()).subscribe(tick -> handler.reap());
        try {
            DisposableServer http = HttpLimits.server(where.host(), where.httpPort())
                    .route(routes -> routes.post("/v1/completions", handler::completions)
                            .get("/health", (req, res) -> res.sendString(Mono.just("{\"status\":\"ok\"}")))
                            .get("/metrics", (req, res) -> meters.serve(res)))
                    .bindNow();
            BlockMetrics.register(meters, blocks);
            BlockMetrics.registerIncarnation(meters, handler.incarnation());
            meters.gauge("kvflux.decode.requests.running", "Requests from their arrival to their end",
                    handler.active(), Map::size);
            meters.gauge("kvflux.notify.connections.open", "Inbound notify connections open", notify,
                    NotifyServer::openConnections);
            DecodeServer server = new DecodeServer(http, notify, client, expected, handler, reaper, where.host(), auth,
                    meters);
            LOG.info("decode listening: http {}, notify {} ({}), model {}, receive deadline {}",
                    Instance.hostPort(server.httpAddress()), Instance.hostPort(server.notifyAddress()),
                    auth == null ? "unsigned" : "signed", model,
                    receiveDeadline == null ? "none" : receiveDeadline.toMillis() + " ms");
            return server;
        } catch (RuntimeException e) {
            reaper.dispose();
            notify.close();
            client.close();
            throw new IllegalStateException("cannot start decode's HTTP server on " + where.host() + ":"
                    + where.httpPort() + ": " + HttpLimits.bindFailure(where.host(), where.httpPort(), e), e);
        }
    }

    /** Registers with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    public DecodeServer pingProxy(String proxyBaseUrl, Duration interval) {
        pinger.dispose();
        pinger = InstancePinger.start(proxyBaseUrl, instance(), interval, auth, incarnation());
        return this;
    }

    /** This instance's incarnation, new at every start. */
    public long incarnation() {
        return handler.incarnation;
    }

    /** This instance as the proxy knows it. */
    public Instance instance() {
        return new Instance(Role.DECODE, httpAddress(), notifyAddress());
    }

    public InetSocketAddress httpAddress() {
        return InetSocketAddress.createUnresolved(host, ((InetSocketAddress) http.address()).getPort());
    }

    public InetSocketAddress notifyAddress() {
        return InetSocketAddress.createUnresolved(host, notify.address().getPort());
    }

    /** The registry the role's meters are in ({@link Builder#meterRegistry}). */
    public MeterRegistry meterRegistry() {
        return meters.registry();
    }

    /** The notify channel's counters (write_done, write_failed, deadlines, late notices, bad frames). */
    public NotifyMetrics metrics() {
        return expected.metrics();
    }

    /**
     * Stops serving: new requests are refused with 503 ({@code decode_shutting_down}), every request still
     * waiting for its KV fails with 503 and the reason, and prefill is told {@code abort} for each (this
     * waits up to 2 s for those to be delivered); then the ports close. Logs what it did.
     */
    @Override
    public void close() {
        pinger.dispose();
        int failed = handler.shutDown();
        long until = System.nanoTime() + ABORTS_ON_CLOSE_WITHIN.toNanos();
        while (handler.stats.abortsInFlight.get() > 0 && until - System.nanoTime() > 0) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        LOG.info("decode stopping: {} requests waiting for their KV failed and prefill was told abort ({} not"
                + " confirmed)", failed, handler.stats.abortsInFlight.get());
        reaper.dispose();
        http.disposeNow();
        notify.close();
        client.close();
        meters.close();
    }

    /** Blocks per state, for tests and the chaos run. */
    BlockAllocator.Snapshot blocks() {
        return handler.blocks.snapshot();
    }

    /** Prefill could not be given the request's block list, so it cannot write and the KV will never come. */
    private static final class BlocksUndeliverableException extends RuntimeException {
        BlocksUndeliverableException(String transferId, InetSocketAddress prefill, Duration within) {
            super("decode could not deliver its block list (remote_blocks) for transfer " + transferId
                    + " to prefill's notify address " + Instance.hostPort(prefill) + " within " + within.toMillis()
                    + " ms, so prefill cannot write this request's KV; check that prefill is running and that its"
                    + " notify port is reachable from decode, then retry", null, false, false);
        }
    }

    /**
     * @param blocksWithin how long remote_blocks is retried towards prefill
     * @param failWhenUndeliverable whether a request whose remote_blocks could not be delivered fails at once
     *     (with a receive deadline) or keeps waiting for its notice (without one, as vLLM does)
     */
    /**
     * Decode's counters beyond the notify channel's, as meters of the role: {@code kvflux.decode.aborts.sent},
     * {@code kvflux.decode.releases} (tag {@code result}: held, or unknown when no blocks were held for it),
     * {@code kvflux.decode.releases.before.request}, {@code kvflux.decode.requests.refused} (tag
     * {@code reason}: out_of_blocks, shutting_down), {@code kvflux.notify.messages.stale},
     * {@code kvflux.decode.kv.checks} (tag {@code result}: verified, corrupt) and
     * {@code kvflux.decode.requests.failed.peer.restart}.
     */
    static final class DecodeStats {
        final Counter abortsSent;
        final Counter releases;
        final Counter releasesUnknown;
        /** Releases that came before their request's blocks, applied when the blocks were granted. */
        final Counter releasesBeforeRequest;
        final Counter refusedOutOfBlocks;
        final Counter refusedShuttingDown;
        final Counter staleIncarnation;
        final Counter corruptKv;
        final Counter failedOnPrefillRestart;
        final Counter kvVerified;
        final AtomicInteger abortsInFlight = new AtomicInteger();
        private final RoleMetrics meters;

        DecodeStats(RoleMetrics meters) {
            this.meters = meters;
            abortsSent = meters.counter("kvflux.decode.aborts.sent", "Abort messages sent to prefill");
            String releasesName = "kvflux.decode.releases";
            String releasesHelp = "Release messages from prefill, by whether they found blocks held";
            releases = meters.counter(releasesName, releasesHelp, "result", "held");
            releasesUnknown = meters.counter(releasesName, releasesHelp, "result", "unknown");
            releasesBeforeRequest = meters.counter("kvflux.decode.releases.before.request",
                    "Releases that came before their request's blocks, applied when the blocks were granted");
            String refused = "kvflux.decode.requests.refused";
            String refusedHelp = "Requests refused at once, by reason";
            refusedOutOfBlocks = meters.counter(refused, refusedHelp, "reason", "out_of_blocks");
            refusedShuttingDown = meters.counter(refused, refusedHelp, "reason", "shutting_down");
            staleIncarnation = meters.counter("kvflux.notify.messages.stale",
                    "Messages rejected because they came from or were meant for another incarnation of the peer");
            String checks = "kvflux.decode.kv.checks";
            String checksHelp = "Checks of write_done's checksum against the granted blocks, by result";
            kvVerified = meters.counter(checks, checksHelp, "result", "verified");
            corruptKv = meters.counter(checks, checksHelp, "result", "corrupt");
            failedOnPrefillRestart = meters.counter("kvflux.decode.requests.failed.peer.restart",
                    "Requests failed at once because the prefill their KV was to come from restarted");
            kvWait("write_done");
            kvWait("write_failed");
        }

        /** The wait for a request's KV ended with {@code outcome}, {@code took} after the request arrived. */
        void recordKvWait(String outcome, long tookNanos) {
            kvWait(outcome).record(tookNanos, java.util.concurrent.TimeUnit.NANOSECONDS);
        }

        private io.micrometer.core.instrument.Timer kvWait(String outcome) {
            return meters.timer("kvflux.decode.kv.wait",
                    "From a request's arrival to the end of its wait for the KV, by outcome", "outcome", outcome);
        }
    }

    /** Decode is stopping; the request's KV will not be waited for. */
    private static final class ShuttingDownException extends RuntimeException {
        ShuttingDownException() {
            super("decode is shutting down; the request's KV is no longer waited for; retry on another decode"
                    + " instance", null, false, false);
        }
    }

    /** The prefill instance the request's KV was to come from restarted; its previous life's work is gone. */
    private static final class PrefillRestartedException extends RuntimeException {
        PrefillRestartedException(InetSocketAddress prefill, long previous, long current) {
            super("prefill " + Instance.hostPort(prefill) + " restarted (incarnation " + previous + " -> " + current
                    + ") before this request's KV was written; retry the request", null, false, false);
        }
    }

    /** One request from its arrival to its end, for shutdown and for the abort sent to prefill. */
    private static final class Active {
        final String id;
        final InetSocketAddress prefill;
        final List<Long> blocks;
        final Sinks.Empty<Void> stop = Sinks.empty();
        final long arrivalMillis = System.currentTimeMillis();
        final long arrivalNanos = System.nanoTime();
        /** Set once prefill said write_done or write_failed: then prefill needs no abort. */
        volatile boolean prefillSettled;
        /** The request's trace id, for log lines outside its chain; null when not traced. */
        volatile String traceId;
        volatile String failure;

        Active(String id, InetSocketAddress prefill, List<Long> blocks) {
            this.id = id;
            this.prefill = prefill;
            this.blocks = blocks;
        }
    }

    /**
     * @param blocksWithin how long remote_blocks is retried towards prefill
     * @param failWhenUndeliverable whether a request whose remote_blocks could not be delivered fails at once
     *     (with a receive deadline) or keeps waiting for its notice (without one, as vLLM does)
     */
    private record Handler(ServingModel model, ExpectedTransfers expected, NotifyClient client, BlockAllocator blocks,
                           Duration blockLease, Duration blocksWithin, boolean failWhenUndeliverable,
                           Duration receiveDeadline, DecodeStats stats, Map<String, Active> active,
                           AtomicBoolean closing, long incarnation, Map<InetSocketAddress, Long> prefillIncarnations,
                           EarlyReleases earlyReleases, ObservationRegistry observations) {

        /**
         * The notify server's handler: a message from prefill about another incarnation's blocks is rejected
         * and counted; {@code release} frees or unquarantines blocks; the rest is for expect.
         */
        void accept(NotifyMessage message) {
            Active request = active.get(message.transferId());
            try (LogContext.Scope scope = LogContext.open(message.transferId(), request == null ? null
                    : request.traceId)) {
                // only for a request decode serves: a notice about anything else starts no span
                if (request != null && message.traceparent() != null) {
                    Spans.received(observations, "kvflux.notify.receive", message.transferId(), message.traceparent())
                            .stop();
                }
                handle(message);
            }
        }

        private void handle(NotifyMessage message) {
            long to = switch (message) {
                case NotifyMessage.WriteDone done -> done.toIncarnation();
                case NotifyMessage.WriteFailed failed -> failed.toIncarnation();
                case NotifyMessage.Release release -> release.toIncarnation();
                default -> 0;
            };
            if (to != 0 && to != incarnation) {
                stats.staleIncarnation.increment();
                LOG.warn("transfer {}: rejected {} about blocks of decode incarnation {}, not this one ({}): it was"
                        + " meant for this decode before a restart", message.transferId(), message.type(), to,
                        incarnation);
                return;
            }
            if (message.incarnation() != 0 && !fromCurrentPrefill(message)) {
                return;
            }
            if (message instanceof NotifyMessage.WriteDone done && done.checksum() != 0) {
                Active a = active.get(done.transferId());
                if (a != null) {
                    long expectedSum = KvChecksum.of(a.id, model.layers(), a.blocks);
                    if (expectedSum != done.checksum()) {
                        stats.corruptKv.increment();
                        LOG.error("transfer {}: KV content check failed (prefill's checksum {} over the blocks it wrote,"
                                + " {} expected over decode's blocks); the request fails instead of decoding from"
                                + " wrong KV", LogText.escape(a.id), Long.toHexString(done.checksum()),
                                Long.toHexString(expectedSum));
                        expected.accept(new NotifyMessage.WriteFailed(a.id, StatusCode.ERR_BAD_STATE,
                                "KV content check failed: the KV prefill wrote does not match the blocks decode granted"
                                        + " for this transfer; not decoding from it"));
                        return;
                    }
                    stats.kvVerified.increment();
                }
            }
            if (message instanceof NotifyMessage.Release release) {
                boolean held;
                synchronized (earlyReleases) {
                    held = blocks.release(release.transferId());
                    if (!held) {
                        // prefill may be done with a transfer before decode's request for it has its blocks
                        earlyReleases.remember(release.transferId());
                    }
                }
                if (held) {
                    stats.releases.increment();
                } else {
                    stats.releasesUnknown.increment();
                    LOG.debug("release for transfer {}, which holds no blocks here (late, duplicate, or before its"
                            + " request)", LogText.escape(release.transferId()));
                }
                return;
            }
            expected.accept(message);
        }

        /**
         * Checks a prefill message's incarnation against the newest seen from that prefill (known through the
         * transfer's request). An older one is rejected and counted; a newer one means prefill restarted:
         * every request waiting for KV from its previous incarnation (that came before the restart) fails at
         * once with 503 {@code prefill_restarted}.
         *
         * @return false if the message is stale and must be dropped
         */
        private boolean fromCurrentPrefill(NotifyMessage message) {
            Active a = active.get(message.transferId());
            if (a == null) {
                return true;
            }
            long known = prefillIncarnations.getOrDefault(a.prefill, 0L);
            if (message.incarnation() < known) {
                stats.staleIncarnation.increment();
                LOG.warn("transfer {}: rejected {} from prefill incarnation {}, older than {} (from before a"
                        + " restart)", LogText.escape(a.id), message.type(), message.incarnation(), known);
                return false;
            }
            if (known == 0 && prefillIncarnations.size() >= Incarnation.MAX_PEERS_TRACKED) {
                return true; // peers come from requests: past the bound, a new one is used without restart tracking
            }
            if (message.incarnation() > known
                    && prefillIncarnations.merge(a.prefill, message.incarnation(), Math::max) == message.incarnation()
                    && known != 0) {
                long startedAt = Incarnation.startMillis(message.incarnation());
                int failed = 0;
                for (Active other : active.values()) {
                    if (other.prefill.equals(a.prefill) && !other.prefillSettled && other.arrivalMillis < startedAt
                            && other.stop.tryEmitError(new PrefillRestartedException(a.prefill, known,
                                    message.incarnation())) == Sinks.EmitResult.OK) {
                        failed++;
                    }
                }
                stats.failedOnPrefillRestart.increment(failed);
                LOG.warn("prefill {} restarted (incarnation {} -> {}): failed {} requests waiting for KV from its"
                        + " previous incarnation", Instance.hostPort(a.prefill), known, message.incarnation(), failed);
            }
            return true;
        }

        /** Frees quarantined blocks whose lease passed: prefill never said release. */
        void reap() {
            for (String owner : blocks.reclaimExpired()) {
                try (LogContext.Scope scope = LogContext.open(owner, null)) {
                    LOG.warn("transfer {}: prefill did not release decode's blocks within the lease of {} ms after"
                            + " the request ended (or after its receive deadline, if later); reclaimed them (prefill is"
                            + " gone, unreachable, or never saw the transfer)", owner, blockLease.toMillis());
                }
            }
        }

        /** Refuses new requests and fails every waiting one; returns how many were failed. */
        int shutDown() {
            closing.set(true);
            int n = 0;
            for (Active a : active.values()) {
                if (!a.prefillSettled) {
                    a.stop.tryEmitError(new ShuttingDownException());
                    n++;
                }
            }
            return n;
        }

        Publisher<Void> completions(HttpServerRequest request, HttpServerResponse response) {
            return HttpJson.withBody(request, response, body -> serve(body, request.requestHeaders(), response));
        }

        private Publisher<Void> serve(String body, HttpHeaders headers, HttpServerResponse response) {
            CompletionRequest request;
            try {
                ObjectNode json = HttpJson.object(body);
                request = CompletionRequest.parse(json, Role.DECODE);
            } catch (IllegalArgumentException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "bad_request", e.getMessage());
            }
            String id = request.params().transferId();
            Observation span = Spans.server(observations, "kvflux.decode.request", id, headers);
            String traceId = Spans.traceId(span);
            try (LogContext.Scope scope = LogContext.open(id, traceId)) {
                return Mono.from(serve(request, span, traceId, response))
                        .doOnError(span::error)
                        .doFinally(signal -> span.stop())
                        .contextWrite(LogContext.context(id, traceId));
            }
        }

        /** Takes the request in, or refuses it at once; the request's answer. */
        private Publisher<Void> serve(CompletionRequest request, Observation span, String traceId,
                HttpServerResponse response) {
            String id = request.params().transferId();
            InetSocketAddress prefill = request.params().remoteNotify();
            if (closing.get()) {
                stats.refusedShuttingDown.increment();
                sendAbort(id, traceId, prefill, "decode is shutting down");
                return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                        "decode_shutting_down", new ShuttingDownException().getMessage());
            }
            List<Long> granted;
            try {
                synchronized (earlyReleases) {
                    granted = blocks.allocate(id, model.blocksFor(request.promptTokens()));
                    if (earlyReleases.take(id)) {
                        blocks.release(id); // prefill is already done with it: free the blocks when the request ends
                        stats.releasesBeforeRequest.increment();
                    }
                }
            } catch (BlockAllocator.OutOfBlocksException e) {
                stats.refusedOutOfBlocks.increment();
                sendAbort(id, traceId, prefill, "decode is out of KV blocks");
                return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                        "kv_blocks_exhausted", e.getMessage());
            } catch (IllegalStateException e) {
                return HttpJson.error(response, HttpResponseStatus.CONFLICT, "invalid_request_error",
                        "duplicate_transfer_id", "transfer " + id + " is already running here; every request needs"
                                + " its own transfer id");
            }
            Active a = new Active(id, prefill, granted);
            a.traceId = traceId;
            active.put(id, a);
            Mono<Void> askForKv = Mono.defer(() -> {
                        blocks.writing(id);
                        return client.send(prefill, new NotifyMessage.RemoteBlocks(id, id, granted, 0, incarnation), blocksWithin);
                    })
                    .flatMap(delivered -> delivered || !failWhenUndeliverable ? Mono.<Void>empty()
                            : Mono.error(new BlocksUndeliverableException(id, prefill, blocksWithin)));
            Mono<Void> kv = expected.expect(id)
                    .doOnSuccess(v -> a.prefillSettled = true)
                    .doOnError(RemoteWriteFailedException.class, e -> a.prefillSettled = true);
            // expect() registers the transfer when subscribed, before remote_blocks lets prefill write
            Mono<Void> arrived = Mono.firstWithSignal(Mono.when(kv, askForKv), a.stop.asMono())
                    .doOnSuccess(v -> stats.recordKvWait("write_done", System.nanoTime() - a.arrivalNanos))
                    .doOnError(e -> stats.recordKvWait(waitOutcome(e), System.nanoTime() - a.arrivalNanos))
                    .doOnCancel(() -> stats.recordKvWait("cancelled", System.nanoTime() - a.arrivalNanos));
            return Spans.during(observations, "kvflux.decode.receive", id, span, arrived)
                    .doOnError(e -> {
                        a.failure = failureReason(e);
                        LOG.info("transfer {}: fails without its KV: {}", LogText.escape(id), e.getMessage());
                    })
                    .then(Spans.during(observations, "kvflux.decode.generate", id, span,
                            Mono.defer(() -> Mono.from(decode(request, response)))))
                    .onErrorResume(RemoteWriteFailedException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "kv_transfer_failed", e.code().name(),
                            e.getMessage())))
                    .onErrorResume(BlocksUndeliverableException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "kv_transfer_failed", "REMOTE_BLOCKS_UNDELIVERABLE",
                            e.getMessage())))
                    .onErrorResume(ReceiveDeadlineException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.GATEWAY_TIMEOUT, "kv_transfer_timeout", "RECEIVE_DEADLINE",
                            e.getMessage())))
                    .onErrorResume(PrefillRestartedException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "kv_transfer_failed", "prefill_restarted",
                            e.getMessage())))
                    .onErrorResume(ShuttingDownException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable", "decode_shutting_down",
                            e.getMessage())))
                    // expect() refuses a transfer id that is already waiting or finished
                    .onErrorResume(e -> e instanceof IllegalStateException && !response.hasSentHeaders(),
                            e -> Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT,
                                    "invalid_request_error", "duplicate_transfer_id", e.getMessage())))
                    .doFinally(signal -> ended(a));
        }

        /** The {@code outcome} tag of a wait for KV that ended with {@code e}: a bounded set of values. */
        private static String waitOutcome(Throwable e) {
            return switch (e) {
                case RemoteWriteFailedException failed -> "write_failed";
                case ReceiveDeadlineException deadline -> "deadline";
                case BlocksUndeliverableException undeliverable -> "undeliverable";
                case PrefillRestartedException restarted -> "prefill_restarted";
                case ShuttingDownException stopping -> "shutting_down";
                case IllegalStateException duplicate -> "duplicate";
                default -> "error";
            };
        }

        private String failureReason(Throwable e) {
            if (e instanceof ReceiveDeadlineException) {
                return "decode's receive deadline" + (receiveDeadline == null ? "" : " of " + receiveDeadline.toMillis()
                        + " ms") + " passed";
            }
            if (e instanceof BlocksUndeliverableException) {
                return "decode could not deliver its block list";
            }
            if (e instanceof ShuttingDownException) {
                return "decode is shutting down";
            }
            if (e instanceof PrefillRestartedException) {
                return "prefill restarted";
            }
            return "decode's request failed: " + e.getMessage();
        }

        /**
         * The request has ended, once: its blocks are quarantined until prefill's release (freed at once if it
         * came already), and prefill is told {@code abort} unless it already said how the write ended.
         */
        private void ended(Active a) {
            active.remove(a.id, a);
            // the lease counts from the receive deadline at the earliest: prefill may start copies until its own
            // deadline for the transfer (the same length, from about the same arrival) even if this request ended
            // early and the abort telling it so was lost
            blocks.end(a.id, blockLease, receiveDeadline == null ? System.nanoTime()
                    : a.arrivalNanos + receiveDeadline.toNanos());
            if (!a.prefillSettled) {
                sendAbort(a.id, a.traceId, a.prefill, a.failure != null ? a.failure
                        : "decode's client went away before the KV arrived");
            }
        }

        private void sendAbort(String id, String traceId, InetSocketAddress prefill, String reason) {
            stats.abortsSent.increment();
            stats.abortsInFlight.incrementAndGet();
            // an abort is useful until prefill's own deadline for the transfer, later than decode's: retry it
            // for at least 5 s even when the block list's window is shorter
            Duration within = blocksWithin.compareTo(ABORT_AT_LEAST_WITHIN) < 0 ? ABORT_AT_LEAST_WITHIN : blocksWithin;
            client.send(prefill, new NotifyMessage.Abort(id, reason, incarnation), within)
                    .doFinally(signal -> stats.abortsInFlight.decrementAndGet())
                    .contextWrite(LogContext.context(id, traceId))
                    .subscribe();
        }

        private Publisher<Void> decode(CompletionRequest request, HttpServerResponse response) {
            String id = "cmpl-" + request.params().transferId();
            if (!request.stream()) {
                return Mono.delay(model.decodeStep().multipliedBy(request.maxTokens()), Schedulers.parallel())
                        .flatMap(tick -> Mono.from(HttpJson.reply(response, HttpResponseStatus.OK,
                                completion(id, request))));
            }
            Flux<String> events = Flux.interval(model.decodeStep(), Schedulers.parallel())
                    .take(request.maxTokens())
                    .map(i -> "data: " + HttpJson.write(chunk(id, i, i == request.maxTokens() - 1)) + "\n\n")
                    .concatWith(Mono.just("data: [DONE]\n\n"));
            return response.header(HttpHeaderNames.CONTENT_TYPE, "text/event-stream")
                    .sendString(events, StandardCharsets.UTF_8)
                    .then();
        }

        private static ObjectNode chunk(String id, long index, boolean last) {
            ObjectNode chunk = HttpJson.MAPPER.createObjectNode().put("id", id).put("object", "text_completion");
            ObjectNode choice = chunk.putArray("choices").addObject();
            choice.put("index", 0).put("text", " t" + index);
            if (last) {
                choice.put("finish_reason", "length");
            } else {
                choice.putNull("finish_reason");
            }
            return chunk;
        }

        private static ObjectNode completion(String id, CompletionRequest request) {
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < request.maxTokens(); i++) {
                text.append(" t").append(i);
            }
            ObjectNode body = HttpJson.MAPPER.createObjectNode().put("id", id).put("object", "text_completion");
            body.putArray("choices").addObject().put("index", 0).put("text", text.toString())
                    .put("finish_reason", "length");
            body.putObject("usage").put("prompt_tokens", request.promptTokens())
                    .put("completion_tokens", request.maxTokens())
                    .put("total_tokens", request.promptTokens() + request.maxTokens());
            return body;
        }
    }
}
