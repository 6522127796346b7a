package dev.kvflux.serving.proxy;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.serving.vllm.Networks;
import dev.kvflux.serving.vllm.VllmDiscovery;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.netty.DisposableServer;
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
 *   <li>{@code GET /health}: 200 with the live instances (each with {@code "ejected"}: whether its health checks or
 *       requests took it out of the picks) and where they come from: {@code "membership"} is
 *       {@code {"source": "registrations"}} for the built-in registry, or, with {@link Builder#membership etcd},
 *       {@code {"source": "etcd", "cluster", "endpoints", "connected", "since", "records"}} (and {@code "problem"}
 *       while etcd cannot be reached; the proxy then routes to the members it last knew).</li>
 *   <li>{@code GET /metrics}, on the clients' port: the proxy's meters as Prometheus text ({@link RoleMetrics}), all
 *       tagged {@code role=proxy}; {@link ProxyMeters} lists them.</li>
 * </ul>
 *
 * <p>Membership: instances register by {@code POST /register} (the built-in registry, always on when there is a
 * discovery port), or, with {@link Builder#membership(EtcdDiscovery)}, by their records in etcd, which the proxy
 * reads before it binds its ports and then watches ({@link EtcdMembers}), so a proxy started again routes as soon as it
 * listens, and any number of proxies route the same cluster.
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
    private final Disposable healthChecks;
    private final EtcdMembers members;
    private final EtcdClient etcd;
    private final VllmDiscovery vllmDiscovery;

    ProxyServer(DisposableServer server, DisposableServer discovery, ConnectionProvider connections,
            RoleMetrics meters, Disposable healthChecks, EtcdMembers members, EtcdClient etcd,
            VllmDiscovery vllmDiscovery) {
        this.vllmDiscovery = vllmDiscovery;
        this.members = members;
        this.etcd = etcd;
        this.meters = meters;
        this.healthChecks = healthChecks;
        this.server = server;
        this.discovery = discovery;
        this.connections = connections;
    }

    /** The most connections the proxy opens to one instance. */
    public static final int DEFAULT_MAX_CONNECTIONS = 2048;
    /**
     * Requests that may wait at the proxy for a place when {@link Builder#maxInFlight} limits them; each also holds
     * one of its connections.
     */
    public static final int DEFAULT_MAX_QUEUED = 1024;
    /** The most {@code --max-in-flight} and {@code --max-queued} take. */
    static final int ADMISSION_LIMIT = 1_000_000;
    /**
     * How many requests may wait for a connection to one instance, per connection: beyond
     * {@code maxConnections * PENDING_PER_CONNECTION} waiting, a request is refused with 503 at once rather
     * than queued without bound.
     */
    public static final int PENDING_PER_CONNECTION = 2;

    /** How long the proxy waits, by default, for the next bytes of an instance's answer. */
    public static final Duration DEFAULT_UPSTREAM_TIMEOUT = Duration.ofMinutes(10);
    /**
     * How long the proxy waits, by default, for the first byte of decode's answer: longer than decode's default
     * receive deadline (45 s for the default 30 s transfer timeout), so a decode that is alive always answers first.
     */
    public static final Duration DEFAULT_FIRST_BYTE_TIMEOUT = Duration.ofSeconds(60);
    /** How much longer a non-streamed answer may take per token of its {@code max_tokens}, by default. */
    public static final Duration DEFAULT_TOKEN_TIMEOUT = Duration.ofMillis(100);
    /** How long a decode's streams may all be silent before it counts as stalled, by default. */
    public static final Duration DEFAULT_STALL_TIMEOUT = Duration.ofSeconds(5);
    /** How long a canary request may take to be answered whole, by default. */
    public static final Duration DEFAULT_CANARY_TIMEOUT = Duration.ofSeconds(5);
    /** The least time between two canaries through one decode. */
    static final Duration CANARY_GAP = Duration.ofSeconds(2);
    /** The shortest time a health check may take before it counts as failed: a busy instance is not a dead one. */
    static final Duration MIN_PROBE_TIMEOUT = Duration.ofMillis(500);
    /** How often the proxy checks every registered instance's {@code /health}, by default. */
    public static final Duration DEFAULT_HEALTH_INTERVAL = Duration.ofSeconds(1);
    /** The longest the proxy waits for its first read of etcd before it binds its ports without it. */
    static final Duration FIRST_READ_WAIT = Duration.ofSeconds(5);

    /**
     * A proxy's settings; {@link Builder#bindNow()} binds it. Only the registry must be set: the proxy listens
     * on 127.0.0.1, a free port, without a discovery port unless one is given.
     */
    public static Builder builder() {
        return new Builder();
    }

    /** A proxy's settings; {@link #start} binds it. Each setter checks its value. */
    public static final class Builder {
        String host = "127.0.0.1";
        int port;
        int discoveryPort = -1;
        InstanceRegistry registry;
        Duration upstreamTimeout = DEFAULT_UPSTREAM_TIMEOUT;
        Duration firstByteTimeout = DEFAULT_FIRST_BYTE_TIMEOUT;
        Duration healthInterval = DEFAULT_HEALTH_INTERVAL;
        InstanceHealth health = InstanceHealth.defaults();
        int maxModelLen = CompletionSchema.DEFAULT_MAX_MODEL_LEN;
        int maxConnections = DEFAULT_MAX_CONNECTIONS;
        RegistrationAuth registrationAuth;
        RequestAuth requestAuth;
        HttpLimits httpLimits = HttpLimits.DEFAULT;
        MeterRegistry meterRegistry;
        ObservationRegistry observations = ObservationRegistry.NOOP;
        dev.kvflux.serving.observe.Handover.Listener handover = dev.kvflux.serving.observe.Handover.Listener.NONE;
        FirstToken firstToken = FirstToken.DECODE;
        int maxInFlight;
        int maxQueued = DEFAULT_MAX_QUEUED;
        EtcdDiscovery membership;
        Duration etcdHeartbeat = EtcdMembers.DEFAULT_HEARTBEAT;
        ClientKeys clientKeys = ClientKeys.DEFAULT;
        Duration tokenTimeout = DEFAULT_TOKEN_TIMEOUT;
        Duration stallTimeout = DEFAULT_STALL_TIMEOUT;
        Duration canaryTimeout = DEFAULT_CANARY_TIMEOUT;
        InetSocketAddress vllmDiscovery;
        Networks vllmAllow = Networks.LOOPBACK;

        private Builder() {
        }

        /**
         * Takes the cluster's members from etcd as well as from registrations: the records under
         * {@code /kvflux/<cluster>/instances/} are read before the ports are bound (waiting at most 5 s, then binding
         * without them if etcd does not answer) and watched from then on; see {@link EtcdMembers}. Records are checked
         * with the {@link #registrationSecret} when there is one. {@code null} (the default): registrations only.
         */
        public Builder membership(EtcdDiscovery membership) {
            this.membership = membership;
            return this;
        }

        /**
         * How a request's client is named to the roles, which share their KV blocks and prefill time between clients;
         * default {@link ClientKeys#DEFAULT} (the client's API key, else its address).
         */
        public Builder clientKeys(ClientKeys clientKeys) {
            this.clientKeys = Objects.requireNonNull(clientKeys, "clientKeys");
            return this;
        }

        /** How often etcd's status is checked while its watch runs (default 1 s), so a hung etcd is noticed. */
        public Builder etcdHeartbeat(Duration heartbeat) {
            Objects.requireNonNull(heartbeat, "heartbeat");
            if (heartbeat.toMillis() < 10) {
                throw new IllegalArgumentException("etcd heartbeat must be at least 10ms, got " + heartbeat);
            }
            this.etcdHeartbeat = heartbeat;
            return this;
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

        /**
         * Who hears each request's handover stages as the proxy marks them ({@link dev.kvflux.serving.observe.Handover}:
         * proxy in, the client's first byte), with their times; default nobody. The proxy times them into
         * {@code kvflux_handover_stage_seconds} either way.
         */
        public Builder handover(dev.kvflux.serving.observe.Handover.Listener listener) {
            this.handover = Objects.requireNonNull(listener, "listener");
            return this;
        }

        /**
         * Which instance gives a streamed completion its first token; default {@link FirstToken#DECODE}, as vLLM's
         * proxy. {@link FirstToken#PREFILL} passes prefill's token on at once.
         */
        public Builder firstToken(FirstToken firstToken) {
            this.firstToken = Objects.requireNonNull(firstToken, "firstToken");
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
            this.upstreamTimeout = positive(upstreamTimeout, "upstream timeout");
            return this;
        }

        /**
         * At most {@code maxInFlight} completions past the proxy at once: the others wait at the proxy, in arrival
         * order, before prefill or decode sees them, and past {@code maxQueued} waiting one is answered 503
         * ({@code proxy_queue_full}, {@code Retry-After: 1}). 0, the default, lets every request through at once.
         * Under a load that keeps the roles' cores busy, a few in flight shorten every request's hand-offs between
         * the roles (docs/results/handover.md).
         */
        public Builder maxInFlight(int maxInFlight, int maxQueued) {
            if (maxInFlight < 0 || maxInFlight > ADMISSION_LIMIT || maxQueued < 0
                    || maxQueued > ADMISSION_LIMIT) {
                throw new IllegalArgumentException("--max-in-flight and --max-queued must lie between 0 and "
                        + ADMISSION_LIMIT + ", got " + maxInFlight + " and " + maxQueued);
            }
            this.maxInFlight = maxInFlight;
            this.maxQueued = maxQueued;
            return this;
        }

        /**
         * The longest request, prompt and {@code max_tokens} together, in tokens: a longer one is answered 400
         * ({@code context_length_exceeded}) before any instance sees it. Default
         * {@value CompletionSchema#DEFAULT_MAX_MODEL_LEN}.
         */
        public Builder maxModelLen(int maxModelLen) {
            if (maxModelLen < 1) {
                throw new IllegalArgumentException("--max-model-len must be at least 1, got " + maxModelLen);
            }
            this.maxModelLen = maxModelLen;
            return this;
        }

        /**
         * How long decode may take to send the first byte of its answer before the client gets 504
         * ({@code upstream_timeout}) and the request counts against that decode's health; default
         * {@link #DEFAULT_FIRST_BYTE_TIMEOUT}. Keep it longer than decode's receive deadline.
         */
        public Builder firstByteTimeout(Duration firstByteTimeout) {
            this.firstByteTimeout = positive(firstByteTimeout, "first-byte timeout");
            return this;
        }

        /**
         * How much longer than the first-byte timeout a non-streamed answer may take per token of its
         * {@code max_tokens}, since it comes whole at its end: its deadline is the first-byte timeout plus
         * {@code max_tokens} times this. Default {@link #DEFAULT_TOKEN_TIMEOUT}.
         */
        public Builder tokenTimeout(Duration tokenTimeout) {
            this.tokenTimeout = positive(tokenTimeout, "token timeout");
            return this;
        }

        /**
         * How long a decode's streams may all send nothing before it counts as stalled (ejected at once when another
         * decode's streams moved meanwhile; else a canary request through it decides). Default
         * {@link #DEFAULT_STALL_TIMEOUT}.
         */
        public Builder stallTimeout(Duration stallTimeout) {
            this.stallTimeout = positive(stallTimeout, "stall timeout");
            return this;
        }

        /**
         * Takes the registrations of vLLM's MoRIIO instances, as vLLM's proxy does: a ZeroMQ ROUTER on {@code address}
         * (vLLM's default port is {@value VllmDiscovery#DEFAULT_PORT}) taking msgpack registrations
         * ({@link VllmDiscovery}) from the {@code allowed} networks only. Their requests are then sent as vLLM's proxy
         * sends them ({@link VllmLegs}), to pairs of vLLM instances; kvflux's roles are paired among themselves.
         * {@code null} (the default): none.
         */
        public Builder vllmDiscovery(InetSocketAddress address, Networks allowed) {
            this.vllmDiscovery = address;
            this.vllmAllow = Objects.requireNonNull(allowed, "allowed");
            return this;
        }

        /** How long a canary request may take to be answered whole before its decode counts as failed; default 5 s. */
        public Builder canaryTimeout(Duration canaryTimeout) {
            this.canaryTimeout = positive(canaryTimeout, "canary timeout");
            return this;
        }

        private static Duration positive(Duration d, String what) {
            Objects.requireNonNull(d, what);
            if (d.isZero() || d.isNegative()) {
                throw new IllegalArgumentException(what + " must be positive, got " + DurationText.of(d));
            }
            return d;
        }

        /**
         * How often every registered instance's {@code GET /health} is checked (each check may take half of it, and at
         * least 500 ms);
         * default {@link #DEFAULT_HEALTH_INTERVAL}. Failed checks and failed requests eject an instance as
         * {@code health} says ({@link InstanceHealth#defaults()} unless set).
         */
        public Builder healthChecks(Duration interval, InstanceHealth health) {
            Objects.requireNonNull(interval, "interval");
            if (interval.toMillis() < 10) {
                throw new IllegalArgumentException("health-check interval must be at least 10ms, got "
                        + DurationText.of(interval));
            }
            this.healthInterval = interval;
            this.health = Objects.requireNonNull(health, "health");
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
         * The cluster's notify secret: only registrations signed with it are accepted ({@link RegistrationAuth}),
         * and every completion the proxy sends to a role is signed with it ({@link RequestAuth}), which a role with
         * the same secret requires. {@code null} (the default) accepts unsigned registrations and signs nothing, so
         * the discovery port and the roles' HTTP ports must then be reachable by the cluster alone.
         */
        public Builder registrationSecret(NotifyAuth secret) {
            this.registrationAuth = secret == null ? null : RegistrationAuth.of(secret);
            this.requestAuth = secret == null ? null : RequestAuth.of(secret);
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
            return ProxyStart.bind(this);
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
        if (vllmDiscovery != null) {
            vllmDiscovery.close();
        }
        healthChecks.dispose();
        if (members != null) {
            members.dispose();
            etcd.close();
        }
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
