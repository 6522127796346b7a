package dev.kvflux.serving.proxy;

import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.serving.vllm.VllmDiscovery;
import dev.kvflux.transfer.LogContext;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/** Starts a proxy from its settings ({@link ProxyServer.Builder#bindNow()}): its pool, membership, routes and ports. */
final class ProxyStart {
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    private ProxyStart() {
    }

    static ProxyServer bind(ProxyServer.Builder b) {
        Objects.requireNonNull(b.registry, "set a registry before starting the proxy");
        if (b.requestAuth == null && !HttpLimits.isLoopback(b.host)) {
            throw new IllegalStateException("the proxy binds " + b.host + ", not a loopback address, without a notify"
                    + " secret; give it the cluster's secret (registrationSecret(...), KVFLUX_NOTIFY_SECRET or"
                    + " notify.secret) so that registrations and the requests it sends are signed");
        }
        LogContext.enable();
        int maxPending = b.maxConnections * ProxyServer.PENDING_PER_CONNECTION;
        ConnectionProvider connections = b.httpLimits.poolNamed("kvflux-proxy")
                .maxConnections(b.maxConnections).pendingAcquireMaxCount(maxPending).build();
        HttpClient client = HttpClient.create(connections).responseTimeout(b.upstreamTimeout);
        RoleMetrics meters = RoleMetrics.of(b.meterRegistry, "proxy");
        EtcdClient etcd = null;
        EtcdMembers members = null;
        if (b.membership != null) {
            etcd = EtcdClient.of(b.membership.endpoints());
            members = EtcdMembers.start(etcd, b.membership.cluster(), b.registry, b.registrationAuth, b.etcdHeartbeat);
            Boolean read = members.firstRead().timeout(ProxyServer.FIRST_READ_WAIT, Mono.just(false)).block();
            if (!Boolean.TRUE.equals(read)) {
                LOG.warn("etcd ({}) did not answer the first read of cluster {}: starting without its members;"
                        + " they are taken as soon as it answers", etcd.endpointsText(), b.membership.cluster());
            }
        }
        EtcdMembers started = members;
        EtcdClient startedEtcd = etcd;
        Runnable stopMembership = () -> {
            if (started != null) {
                started.dispose();
                startedEtcd.close();
            }
        };
        AtomicReference<ProxyRoutes.Handlers> routes = new AtomicReference<>();
        Canaries canaries = new Canaries(b.health, b.canaryTimeout, ProxyServer.CANARY_GAP, Schedulers.parallel(),
                (decode, within) -> routes.get().canary(decode, within));
        StreamWatch streams = new StreamWatch(b.health, b.stallTimeout, Schedulers.parallel(), canaries::suspect);
        canaries.watch(streams);
        VllmInstances vllm = new VllmInstances(b.registry);
        ProxyRoutes.Handlers handlers = new ProxyRoutes.Handlers(b.registry, client, b.maxConnections, maxPending,
                new AtomicBoolean(), b.requestAuth, meters, b.observations, b.health,
                new ProxyRoutes.Bounds(b.firstByteTimeout, b.tokenTimeout), b.maxModelLen, b.clientKeys,
                streams, canaries, vllm, new ClientCaps(),
                dev.kvflux.serving.observe.Handover.of(meters, b.handover), b.firstToken,
                b.maxInFlight == 0 ? ProxyAdmission.NONE : new ProxyAdmission(b.maxInFlight, b.maxQueued));
        routes.set(handlers);
        DiscoveryRoutes discoveryRoutes = new DiscoveryRoutes(b.registry, b.registrationAuth, new AtomicBoolean(),
                new AtomicBoolean(), b.health, members, HttpClient.create(connections));
        DisposableServer server;
        try {
            server = b.httpLimits.serverOn(b.host, b.port)
                    .route(r -> r
                            .post("/v1/completions", handlers::completions)
                            .post("/v1/chat/completions", handlers::chat)
                            .get("/health", discoveryRoutes::health)
                            .get("/metrics", (req, res) -> meters.serve(res)))
                    .bindNow();
        } catch (RuntimeException e) {
            connections.dispose();
            stopMembership.run();
            throw new IllegalStateException("cannot start the proxy on " + b.host + ":" + b.port + ": "
                    + HttpLimits.bindFailure(b.host, b.port, e), e);
        }
        DisposableServer discovery = null;
        if (b.discoveryPort >= 0) {
            try {
                discovery = b.httpLimits.serverOn(b.host, b.discoveryPort)
                        .route(r -> r.post("/register", discoveryRoutes::register).get("/health",
                                discoveryRoutes::health))
                        .bindNow();
            } catch (RuntimeException e) {
                server.disposeNow();
                connections.dispose();
                stopMembership.run();
                throw new IllegalStateException("cannot start the proxy's discovery port on " + b.host + ":"
                        + b.discoveryPort + ": " + HttpLimits.bindFailure(b.host, b.discoveryPort, e), e);
            }
        }
        LOG.info("proxy listening on http://{}:{}{}{}", b.host, ((InetSocketAddress) server.address()).getPort(),
                discovery == null ? "" : ", registrations on port "
                        + ((InetSocketAddress) discovery.address()).getPort()
                        + (b.registrationAuth == null ? " (unsigned accepted; this proxy has no notify secret, so"
                                + " instances that have one refuse its requests)" : " (signed only)"),
                b.membership == null ? "" : "; members from etcd " + b.membership.url() + ", cluster "
                        + b.membership.cluster());
        VllmDiscovery vllmDiscovery = null;
        if (b.vllmDiscovery != null) {
            try {
                vllmDiscovery = VllmDiscovery.bind(b.vllmDiscovery.getHostString(), b.vllmDiscovery.getPort(),
                        b.vllmAllow, registration -> vllm.register(registration).name().toLowerCase(
                                java.util.Locale.ROOT));
            } catch (RuntimeException e) {
                server.disposeNow();
                if (discovery != null) {
                    discovery.disposeNow();
                }
                connections.dispose();
                stopMembership.run();
                throw e;
            }
        }
        ProxyMeters.register(meters, handlers, b.registry, b.health, members, canaries, streams);
        ProxyMeters.registerVllm(meters, vllm, vllmDiscovery);
        Duration probeTimeout = b.healthInterval.dividedBy(2).compareTo(ProxyServer.MIN_PROBE_TIMEOUT) > 0
                ? b.healthInterval.dividedBy(2) : ProxyServer.MIN_PROBE_TIMEOUT;
        Disposable probes = HealthChecks.start(b.registry, b.health, canaries, b.healthInterval, probeTimeout,
                HttpClient.create(connections).responseTimeout(probeTimeout));
        // an instance that left is forgotten, so that the ejected count is of listed instances only
        Runnable forgetting = b.registry.onDropped(instance -> {
            b.health.forget(instance);
            canaries.forget(instance);
        });
        Disposable checks = () -> {
            probes.dispose();
            streams.dispose();
            forgetting.run();
        };
        return new ProxyServer(server, discovery, connections, meters, checks, members, etcd, vllmDiscovery);
    }
}
