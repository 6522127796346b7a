package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.MemberRecord;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.tools.chaos.EtcdProcess;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * Membership in a real etcd (started from {@code /usr/bin/etcd}, Debian's etcd-server, on free loopback ports):
 * instances that register there are routed by every proxy of their cluster; an instance whose lease ends is dropped
 * everywhere; a proxy started again routes at once; with etcd down a proxy keeps its last members and says so; and a
 * proxy with the cluster's secret takes only records signed with it. Leases are 2 s.
 */
class EtcdMembershipTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    /**
     * For what needs a lease's keep-alive to fail and a new grant and put to follow, each a round trip to etcd: about a
     * second on a quiet host, past 10 s beside 4 busy processes.
     */
    private static final Duration RENEWAL = Duration.ofSeconds(30);
    private static final Duration TTL = Duration.ofSeconds(2);
    private static final String SECRET = "etcd-membership-test-secret-0123456789";
    private static final NotifyAuth AUTH = NotifyAuth.of(SECRET);
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final AtomicInteger CLUSTERS = new AtomicInteger();

    @TempDir
    static Path dir;
    private static EtcdProcess etcd;

    private final List<AutoCloseable> open = new ArrayList<>();
    /** Each test's own cluster, so that one etcd serves them all. */
    private final String cluster = "test-" + CLUSTERS.incrementAndGet();

    @BeforeAll
    static void startEtcd() throws Exception {
        etcd = EtcdProcess.start(dir);
    }

    @AfterAll
    static void stopEtcd() throws Exception {
        etcd.close();
    }

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private EtcdDiscovery discovery() {
        return EtcdDiscovery.parse(etcd.url()).withCluster(cluster).withLeaseTtl(TTL);
    }

    private EtcdClient client() {
        EtcdClient client = EtcdClient.of(List.of(etcd.endpoint()));
        open.add(client);
        return client;
    }

    /** A proxy of this test's cluster, with the cluster's secret, and its registry. */
    private record Proxy(ProxyServer server, InstanceRegistry registry) {
    }

    private Proxy proxy() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        ProxyServer server = ProxyServer.builder().registry(registry).membership(discovery()).registrationSecret(AUTH)
                .etcdHeartbeat(Duration.ofMillis(200)).bindNow();
        open.add(server);
        return new Proxy(server, registry);
    }

    /** A decode and a prefill registered in etcd. */
    private List<Instance> roles() {
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
        open.add(engine);
        DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(3)).auth(AUTH)
                .bindNow();
        open.add(decode);
        PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine).notifyWithin(Duration.ofSeconds(3))
                .auth(AUTH).bindNow();
        open.add(prefill);
        decode.registerIn(discovery());
        prefill.registerIn(discovery());
        return List.of(decode.instance(), prefill.instance());
    }

    private static String complete(ProxyServer proxy) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer("{\"prompt\": \"a b c\", \"max_tokens\": 2}"
                        .getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    private static JsonNode health(ProxyServer proxy) {
        String body = HttpClient.create().get().uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                .responseSingle((res, content) -> content.asString()).block(WAIT);
        return HttpJson.object(body);
    }

    private static PrometheusText metrics(ProxyServer proxy) {
        return PrometheusText.parse(HttpClient.create().get().uri("http://127.0.0.1:" + proxy.address().getPort()
                + "/metrics").responseSingle((res, content) -> content.asString()).block(WAIT));
    }

    private static void await(String what, Duration within, BooleanSupplier done) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - until > 0) {
                throw new AssertionError("not within " + within.toMillis() + " ms: " + what);
            }
            Thread.sleep(20);
        }
    }

    private static boolean lists(Proxy proxy, List<Instance> instances) {
        List<Instance> live = new ArrayList<>(proxy.registry().live(Role.DECODE));
        live.addAll(proxy.registry().live(Role.PREFILL));
        return live.containsAll(instances);
    }

    private static Instance decodeAt(int port) {
        return new Instance(Role.DECODE, InetSocketAddress.createUnresolved("127.0.0.1", port),
                InetSocketAddress.createUnresolved("127.0.0.1", port + 1));
    }

    /** Puts {@code record}'s value signed by {@code signer} under a new lease of {@code ttl} that nobody keeps alive. */
    private long putUnkept(MemberRecord record, RegistrationAuth signer, Duration ttl) {
        EtcdClient client = client();
        long lease = client.grant(ttl).block(WAIT);
        client.put(record.key(), record.withLease(lease).encode(signer), lease).block(WAIT);
        return lease;
    }

    @Test
    void anInstanceRegisteredInEtcdIsRoutedByEveryProxyOfItsCluster() throws Exception {
        Proxy a = proxy();
        Proxy b = proxy();
        List<Instance> roles = roles();

        await("both proxies list both roles", WAIT, () -> lists(a, roles) && lists(b, roles));

        assertThat(complete(a.server())).startsWith("200 ");
        assertThat(complete(b.server())).startsWith("200 ");
        assertThat(health(a.server()).path("membership").path("connected").asBoolean()).isTrue();
        assertThat(health(a.server()).path("membership").path("source").asText()).isEqualTo("etcd");
    }

    @Test
    void anInstanceWhoseLeaseExpiresIsDroppedByEveryProxy() throws Exception {
        Proxy a = proxy();
        Proxy b = proxy();
        Instance decode = decodeAt(7200);
        putUnkept(new MemberRecord(cluster, decode, 1, 0), RegistrationAuth.of(AUTH), TTL);
        await("both proxies list the instance", WAIT, () -> lists(a, List.of(decode)) && lists(b, List.of(decode)));
        long listed = System.nanoTime();

        await("both proxies drop it when its lease ends", WAIT, () -> a.registry().live(Role.DECODE).isEmpty()
                && b.registry().live(Role.DECODE).isEmpty());

        assertThat(Duration.ofNanos(System.nanoTime() - listed)).isLessThan(TTL.plusSeconds(2));
    }

    @Test
    void aProxyStartedAgainRoutesAsSoonAsItIsBound() throws Exception {
        List<Instance> roles = roles();
        Proxy first = proxy();
        await("the first proxy lists both roles", WAIT, () -> lists(first, roles));
        first.server().close();

        long start = System.nanoTime();
        Proxy again = proxy();
        long bound = System.nanoTime();
        String answer = complete(again.server());
        long answered = System.nanoTime();

        assertThat(answer).startsWith("200 ");
        assertThat(Duration.ofNanos(answered - bound)).as("from bound to the first answer").isLessThan(Duration.ofSeconds(1));
        assertThat(Duration.ofNanos(bound - start)).as("binding, with the read of etcd").isLessThan(Duration.ofSeconds(5));
    }

    @Test
    void withEtcdDownAProxyKeepsRoutingToItsLastMembersSaysSoAndResyncsWhenItIsBack() throws Exception {
        Proxy proxy = proxy();
        List<Instance> roles = roles();
        await("the proxy lists both roles", WAIT, () -> lists(proxy, roles));
        Instant before = Instant.now();

        etcd.kill();
        try {
            await("the proxy says etcd is gone", WAIT,
                    () -> !health(proxy.server()).path("membership").path("connected").asBoolean());
            Thread.sleep(TTL.plusSeconds(1).toMillis()); // past every lease's TTL: nothing expires while etcd is down
            JsonNode down = health(proxy.server()).path("membership");

            assertThat(complete(proxy.server())).startsWith("200 ");
            assertThat(down.path("problem").asText()).contains("etcd is unreachable");
            assertThat(Instant.parse(down.path("since").asText())).isAfterOrEqualTo(before.minusSeconds(1));
            assertThat(metrics(proxy.server()).count("kvflux_proxy_membership_connected", "source", "etcd")).isZero();
            assertThat(lists(proxy, roles)).isTrue();
        } finally {
            etcd.startAgain();
        }

        await("the proxy reconnects", WAIT, () -> health(proxy.server()).path("membership").path("connected").asBoolean());
        assertThat(metrics(proxy.server()).count("kvflux_proxy_membership_connected", "source", "etcd")).isEqualTo(1);
        assertThat(metrics(proxy.server()).count("kvflux_proxy_membership_reads_total")).isGreaterThanOrEqualTo(2);
        assertThat(lists(proxy, roles)).isTrue();
        assertThat(complete(proxy.server())).startsWith("200 ");
    }

    @Test
    void aProxyWithTheSecretIgnoresUnsignedForgedAndMovedRecords() throws Exception {
        Proxy proxy = proxy();
        RegistrationAuth other = RegistrationAuth.of(NotifyAuth.of("another-secret-of-the-right-size"));
        putUnkept(new MemberRecord(cluster, decodeAt(7300), 1, 0), null, Duration.ofSeconds(30));
        putUnkept(new MemberRecord(cluster, decodeAt(7310), 2, 0), other, Duration.ofSeconds(30));
        // a record signed with the secret, copied to another incarnation's key
        EtcdClient client = client();
        long lease = client.grant(Duration.ofSeconds(30)).block(WAIT);
        MemberRecord genuine = new MemberRecord(cluster, decodeAt(7320), 3, lease);
        client.put(MemberRecord.prefix(cluster) + "decode/4", genuine.encode(RegistrationAuth.of(AUTH)), lease).block(WAIT);
        Instance signed = decodeAt(7330);
        putUnkept(new MemberRecord(cluster, signed, 5, 0), RegistrationAuth.of(AUTH), Duration.ofSeconds(30));

        await("the signed record is taken", WAIT, () -> lists(proxy, List.of(signed)));
        PrometheusText metrics = metrics(proxy.server());

        assertThat(proxy.registry().live(Role.DECODE)).containsExactly(signed);
        assertThat(metrics.count("kvflux_proxy_membership_records_refused_total", "reason", "unsigned")).isEqualTo(1);
        assertThat(metrics.count("kvflux_proxy_membership_records_refused_total", "reason", "bad_signature")).isEqualTo(1);
        assertThat(metrics.count("kvflux_proxy_membership_records_refused_total", "reason", "mismatch")).isEqualTo(1);
    }

    @Test
    void aRecordPutLongAfterItWasSignedIsRefusedAsStale() throws Exception {
        Proxy proxy = proxy();
        VirtualTimeScheduler past = VirtualTimeScheduler.create();
        past.advanceTimeTo(Instant.ofEpochMilli(System.currentTimeMillis() - 60_000));
        putUnkept(new MemberRecord(cluster, decodeAt(7400), 1, 0), RegistrationAuth.of(AUTH.clock(past)),
                Duration.ofSeconds(30));

        await("the stale record is refused", WAIT, () -> metrics(proxy.server())
                .count("kvflux_proxy_membership_records_refused_total", "reason", "stale") == 1);
        assertThat(proxy.registry().live(Role.DECODE)).isEmpty();
    }

    @Test
    void anInstanceWhoseLeaseIsLostRegistersAgainAndEveryProxyTakesItBack() throws Exception {
        Proxy a = proxy();
        Proxy b = proxy();
        Instance decode = decodeAt(7500);
        EtcdRegistration registration = EtcdRegistration.start(discovery(), decode, 11, AUTH);
        open.add(registration::dispose);
        await("both proxies list the instance", WAIT, () -> lists(a, List.of(decode)) && lists(b, List.of(decode)));
        long lost = registration.lease();

        client().revoke(lost).block(WAIT); // as when etcd let the lease expire behind the instance's back

        await("it registers again with a new lease", RENEWAL, () -> registration.registrations() == 2);
        await("both proxies take it back", RENEWAL, () -> lists(a, List.of(decode)) && lists(b, List.of(decode)));
        assertThat(registration.lease()).isNotZero().isNotEqualTo(lost);
    }

    @Test
    void closingAnInstanceRevokesItsLeaseSoEveryProxyDropsItLongBeforeTheLeaseWouldEnd() throws Exception {
        Proxy a = proxy();
        Proxy b = proxy();
        Instance decode = decodeAt(7700);
        EtcdRegistration registration = EtcdRegistration.start(discovery().withLeaseTtl(Duration.ofSeconds(30)), decode,
                13, AUTH);
        open.add(registration::dispose);
        await("both proxies list the instance", WAIT, () -> lists(a, List.of(decode)) && lists(b, List.of(decode)));

        registration.dispose();
        // a third of the lease: only a revoke ends it that soon (beside a loaded build it took over 3 s, an earlier
        // bound)
        Duration third = Duration.ofSeconds(10);
        await("both proxies drop it", third, () -> a.registry().live(Role.DECODE).isEmpty()
                && b.registry().live(Role.DECODE).isEmpty());

        assertThat(client().range(MemberRecord.prefix(cluster), 10, 1 << 20).block(WAIT).kvs()).isEmpty();
    }
}
