package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * The disaggregated-serving proxy: an OpenAI-style HTTP front that splits each completion between a
 * prefill and a decode instance.
 *
 * <ul>
 *   <li>{@code POST /v1/completions}: checks the request against {@link CompletionSchema} (400
 *       {@code invalid_request} naming the wrong field, before any instance sees it), gives it a transfer
 *       id, sends it to a prefill instance with {@code max_tokens=1} and to a decode instance at the same
 *       time, each with {@code kv_transfer_params} naming the other's notify address, and streams decode's
 *       answer back (status, content type and body as decode sent them). Prefill's answer is dropped,
 *       unless it is an error or prefill cannot be reached before decode's answer has started: then
 *       decode's request is cancelled and the client gets 502 at once, since the KV will never come (503
 *       when prefill refused it as overloaded, so the client knows a retry may succeed). Each request gets
 *       exactly one answer: whichever side's outcome comes first owns it, and the other's is only logged.
 *       503 when no instance of a role is live; 503 ({@code proxy_overloaded}) at once when
 *       {@link #DEFAULT_MAX_CONNECTIONS} requests are open to an instance and
 *       {@link #PENDING_PER_CONNECTION} times as many already wait for a connection to it.</li>
 *   <li>{@code POST /register}, on the discovery port only (the clients' port answers 404): an instance's
 *       ping, {@code {"role", "http", "notify"}} with {@code host:port} addresses, signed with the cluster's
 *       notify secret when the proxy has one ({@link RegistrationAuth}; 401 otherwise); 503
 *       ({@code instance_cap}) for a new instance when its role is full ({@link InstanceRegistry}).</li>
 *   <li>{@code GET /health}: 200 with the live instances.</li>
 *   <li>{@code GET /metrics}, on the clients' port: the proxy's meters as Prometheus text ({@link RoleMetrics}),
 *       all tagged {@code role=proxy}: the timer {@code kvflux.proxy.requests} from a completion's arrival to
 *       the end of its answer (tag {@code status}: the HTTP status, or {@code cancelled} when the client went
 *       away first), {@code kvflux.proxy.upstream.errors} (tags {@code upstream}: prefill or decode, and
 *       {@code reason}: failed, overloaded, unreachable, timeout, pool_full) and the gauge
 *       {@code kvflux.proxy.instances} (live instances, tag {@code upstream}).</li>
 * </ul>
 *
 * <p>With an {@link Builder#observationRegistry ObservationRegistry} that traces, each completion is span
 * {@code kvflux.proxy.completion} (continuing the client's {@code traceparent} header if it sent one) with a
 * child span per instance called, {@code kvflux.proxy.prefill} and {@code kvflux.proxy.decode}, whose
 * {@code traceparent} goes to that instance. The transfer id (and trace id) are in the MDC of the request's log
 * lines ({@link LogContext}).
 */
public final class ProxyServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    private final DisposableServer server;
    private final DisposableServer discovery;
    private final ConnectionProvider connections;
    private final RoleMetrics meters;

    private ProxyServer(DisposableServer server, DisposableServer discovery, ConnectionProvider connections,
            RoleMetrics meters) {
        this.meters = meters;
        this.server = server;
        this.discovery = discovery;
        this.connections = connections;
    }

    /** The most connections the proxy opens to one instance. */
    public static final int DEFAULT_MAX_CONNECTIONS = 2048;
    /**
     * How many requests may wait for a connection to one instance, per connection: beyond
     * {@code maxConnections * PENDING_PER_CONNECTION} waiting, a request is refused with 503 at once rather
     * than queued without bound.
     */
    public static final int PENDING_PER_CONNECTION = 2;

    /** How long the proxy waits, by default, for the next bytes of an instance's answer. */
    public static final Duration DEFAULT_UPSTREAM_TIMEOUT = Duration.ofMinutes(10);

    /**
     * A proxy's settings; {@link Builder#bindNow()} binds it. Only the registry must be set: the proxy listens
     * on 127.0.0.1, a free port, without a discovery port unless one is given.
     */
    public static Builder builder() {
        return new Builder();
    }

    /** A proxy's settings; {@link #start} binds it. Each setter checks its value. */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port;
        private int discoveryPort = -1;
        private InstanceRegistry registry;
        private Duration upstreamTimeout = DEFAULT_UPSTREAM_TIMEOUT;
        private int maxConnections = DEFAULT_MAX_CONNECTIONS;
        private RegistrationAuth registrationAuth;
        private HttpLimits httpLimits = HttpLimits.DEFAULT;
        private MeterRegistry meterRegistry;
        private ObservationRegistry observations = ObservationRegistry.NOOP;

        private Builder() {
        }

        /**
         * The registry the proxy's meters go to, each tagged {@code role=proxy}; by default a new Prometheus
         * registry of its own. {@code GET /metrics} serves it when it is a Prometheus registry (or a composite
         * holding one), otherwise a Prometheus registry added beside it ({@link RoleMetrics#of}).
         */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
            return this;
        }

        /**
         * Where the completions' observations go; default {@link ObservationRegistry#NOOP}: nothing is traced and
         * no {@code traceparent} is sent on.
         */
        public Builder observationRegistry(ObservationRegistry observations) {
            this.observations = Objects.requireNonNull(observations, "observations");
            return this;
        }

        /** The bounds of both ports' connections and of the pool to the instances; default {@link HttpLimits#DEFAULT}. */
        public Builder httpLimits(HttpLimits httpLimits) {
            this.httpLimits = Objects.requireNonNull(httpLimits, "httpLimits");
            return this;
        }

        /** The address both ports bind (default 127.0.0.1). */
        public Builder host(String host) {
            this.host = Objects.requireNonNull(host, "host");
            return this;
        }

        /** The clients' port; 0 (the default) picks a free one. */
        public Builder port(int port) {
            this.port = checkPort(port, 0, "port");
            return this;
        }

        /**
         * The port where instances register ({@code POST /register}) and where {@code GET /health} lists them;
         * 0 picks a free one, -1 (the default) for none: then instances can be added only through the
         * registry. The clients' port never takes registrations.
         */
        public Builder discoveryPort(int discoveryPort) {
            this.discoveryPort = checkPort(discoveryPort, -1, "discovery port");
            return this;
        }

        /** The live instances the proxy picks from, and where registrations go. Required. */
        public Builder registry(InstanceRegistry registry) {
            this.registry = Objects.requireNonNull(registry, "registry");
            return this;
        }

        /**
         * How long an instance's answer may send nothing (before its first byte or between two) before the
         * client gets 504 ({@code upstream_timeout}), or its stream is cut if it has started; default
         * {@link #DEFAULT_UPSTREAM_TIMEOUT}.
         */
        public Builder upstreamTimeout(Duration upstreamTimeout) {
            Objects.requireNonNull(upstreamTimeout, "upstreamTimeout");
            if (upstreamTimeout.isZero() || upstreamTimeout.isNegative()) {
                throw new IllegalArgumentException("upstream timeout must be positive, got " + upstreamTimeout);
            }
            this.upstreamTimeout = upstreamTimeout;
            return this;
        }

        /**
         * The most connections to one instance (default {@link #DEFAULT_MAX_CONNECTIONS}); up to
         * {@link #PENDING_PER_CONNECTION} times as many requests wait for one, and a request beyond that is
         * answered 503 ({@code proxy_overloaded}) at once.
         */
        public Builder maxConnections(int maxConnections) {
            if (maxConnections < 1 || maxConnections > Integer.MAX_VALUE / PENDING_PER_CONNECTION) {
                throw new IllegalArgumentException("maxConnections must be from 1 to "
                        + Integer.MAX_VALUE / PENDING_PER_CONNECTION + ", got " + maxConnections);
            }
            this.maxConnections = maxConnections;
            return this;
        }

        /**
         * Accept only registrations signed with the cluster's notify secret ({@link RegistrationAuth});
         * {@code null} (the default) accepts unsigned ones, so the discovery port must then be reachable by
         * the instances alone.
         */
        public Builder registrationSecret(NotifyAuth secret) {
            this.registrationAuth = secret == null ? null : RegistrationAuth.of(secret);
            return this;
        }

        private static int checkPort(int port, int lowest, String what) {
            if (port < lowest || port > 65535) {
                throw new IllegalArgumentException(what + " " + port + " is out of range; use 1 to 65535, 0 for any"
                        + " free port" + (lowest < 0 ? ", or -1 for none" : ""));
            }
            return port;
        }

        /**
         * Binds the ports and starts serving.
         *
         * @throws IllegalStateException saying why, if a port cannot be bound
         */
        public ProxyServer bindNow() {
            Objects.requireNonNull(registry, "set a registry before starting the proxy");
            LogContext.enable();
            int maxPending = maxConnections * PENDING_PER_CONNECTION;
            ConnectionProvider connections = httpLimits.poolNamed("kvflux-proxy")
                    .maxConnections(maxConnections).pendingAcquireMaxCount(maxPending).build();
            HttpClient client = HttpClient.create(connections).responseTimeout(upstreamTimeout);
            RoleMetrics meters = RoleMetrics.of(meterRegistry, "proxy");
            ProxyRoutes.Handlers handlers = new ProxyRoutes.Handlers(registry, client, maxConnections, maxPending, new AtomicBoolean(),
                    registrationAuth, new AtomicBoolean(), meters, observations);
            DisposableServer server;
            try {
                server = httpLimits.serverOn(host, port)
                        .route(routes -> routes
                                .post("/v1/completions", handlers::completions)
                                .get("/health", handlers::health)
                                .get("/metrics", (req, res) -> meters.serve(res)))
                        .bindNow();
            } catch (RuntimeException e) {
                connections.dispose();
                throw new IllegalStateException("cannot start the proxy on " + host + ":" + port + ": "
                        + HttpLimits.bindFailure(host, port, e), e);
            }
            DisposableServer discovery = null;
            if (discoveryPort >= 0) {
                try {
                    discovery = httpLimits.serverOn(host, discoveryPort)
                            .route(routes -> routes.post("/register", handlers::register).get("/health", handlers::health))
                            .bindNow();
                } catch (RuntimeException e) {
                    server.disposeNow();
                    connections.dispose();
                    throw new IllegalStateException("cannot start the proxy's discovery port on " + host + ":"
                            + discoveryPort + ": " + HttpLimits.bindFailure(host, discoveryPort, e), e);
                }
            }
            LOG.info("proxy listening on http://{}:{}{}", host, ((InetSocketAddress) server.address()).getPort(),
                    discovery == null ? "" : ", registrations on port "
                            + ((InetSocketAddress) discovery.address()).getPort()
                            + (registrationAuth == null ? " (unsigned accepted)" : " (signed only)"));
            // every failure kind is exported from the start, so a rate over them exists before the first one
            handlers.upstreamError(Role.PREFILL, "failed", 0);
            handlers.upstreamError(Role.PREFILL, "overloaded", 0);
            for (Role role : Role.values()) {
                handlers.upstreamError(role, "pool_full", 0);
            }
            handlers.upstreamError(Role.DECODE, "timeout", 0);
            handlers.upstreamError(Role.DECODE, "unreachable", 0);
            for (Role role : Role.values()) {
                meters.gauge("kvflux.proxy.instances", "Live instances the proxy picks from", registry,
                        r -> r.live(role).size(), "upstream", role.wireName());
            }
            return new ProxyServer(server, discovery, connections, meters);
        }
    }

    /** Where clients send completions. */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.address();
    }

    /**
     * Where instances register.
     *
     * @throws IllegalStateException if this proxy has no discovery port
     */
    public InetSocketAddress discoveryAddress() {
        if (discovery == null) {
            throw new IllegalStateException("this proxy was started without a discovery port");
        }
        return (InetSocketAddress) discovery.address();
    }

    @Override
    public void close() {
        server.disposeNow();
        if (discovery != null) {
            discovery.disposeNow();
        }
        connections.dispose();
        meters.close();
    }

    /** The registry the proxy's meters are in ({@link Builder#meterRegistry}). */
    public MeterRegistry meterRegistry() {
        return meters.registry();
    }
}
