package dev.kvflux.tools.chaos;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.MemberRecord;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.Incarnation;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;

/**
 * The chaos run's cluster for the membership faults: a real etcd ({@link EtcdProcess}), one prefill and two decodes
 * that keep their records there (leases of {@value #LEASE_TTL_SECONDS} s), and two proxies that read and watch it, each
 * its own JVM on loopback, all with one notify secret, so that records and requests are signed as in production. Each
 * fault ({@link ChaosFault.Membership}) is a method here that does it to the cluster while the load runs through both
 * proxies, measures how the cluster recovers, and returns the figures. Not thread-safe: one fault at a time.
 */
final class EtcdCluster implements EtcdFaultRun.Cluster {
    /** The cluster's name in etcd. */
    static final String NAME = "chaos";
    /** The instances' lease TTL: short, so that a paused instance's lease ends within the fault. */
    static final int LEASE_TTL_SECONDS = 2;
    private static final Duration WITHIN = Duration.ofSeconds(60);
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();

    private final EtcdProcess etcd;
    private final RoleProcess prefill;
    private final List<RoleProcess> decodes;
    private final List<RoleProcess> proxies;
    private final String secret;
    private final Duration requestTimeout;
    private final List<AutoCloseable> blackholes = new ArrayList<>();

    private EtcdCluster(EtcdProcess etcd, RoleProcess prefill, List<RoleProcess> decodes, List<RoleProcess> proxies,
            String secret, Duration requestTimeout) {
        this.etcd = etcd;
        this.prefill = prefill;
        this.decodes = decodes;
        this.proxies = proxies;
        this.secret = secret;
        this.requestTimeout = requestTimeout;
    }

    /**
     * Starts etcd, the roles (with {@code prefillArgs} and {@code decodeArgs} beside their membership) and the two
     * proxies (with {@code proxyArgs}), logging under {@code logDir}, and waits until both proxies list all three
     * instances.
     */
    static EtcdCluster start(Path logDir, List<String> prefillArgs, List<String> decodeArgs, List<String> proxyArgs,
            Duration requestTimeout) throws Exception {
        EtcdProcess etcd = EtcdProcess.start(Files.createDirectories(logDir.resolve("etcd")));
        byte[] random = new byte[16];
        new SecureRandom().nextBytes(random);
        String secret = HexFormat.of().formatHex(random);
        Map<String, String> env = Map.of(NotifyAuth.ENV, secret);
        List<String> membership = List.of("--discovery", etcd.url(), "--cluster", NAME);
        List<String> roleMembership = new ArrayList<>(membership);
        roleMembership.addAll(List.of("--lease-ttl", LEASE_TTL_SECONDS + "s"));
        // the notify ports of up to 8 ranks each (rank R on the notify port + R)
        RoleProcess prefill = new RoleProcess(Role.PREFILL, freePort(), RoleProcess.freePorts(8),
                concat(prefillArgs, roleMembership),
                logDir.resolve("etcd-prefill.log")).withEnvironment(env);
        List<RoleProcess> decodes = new ArrayList<>();
        List<RoleProcess> proxies = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            decodes.add(new RoleProcess(Role.DECODE, freePort(), RoleProcess.freePorts(8),
                    concat(decodeArgs, roleMembership),
                    logDir.resolve("etcd-decode-" + (char) ('a' + i) + ".log")).withEnvironment(env));
            proxies.add(RoleProcess.proxy(freePort(), freePort(), concat(proxyArgs, membership),
                    logDir.resolve("etcd-proxy-" + (char) ('a' + i) + ".log")).withEnvironment(env));
        }
        EtcdCluster cluster = new EtcdCluster(etcd, prefill, List.copyOf(decodes), List.copyOf(proxies), secret,
                requestTimeout);
        try {
            for (RoleProcess role : cluster.roles()) {
                role.start();
            }
            for (RoleProcess proxy : proxies) {
                proxy.start();
            }
            for (RoleProcess role : cluster.roles()) {
                role.awaitHealthy(WITHIN);
            }
            for (RoleProcess proxy : proxies) {
                proxy.awaitHealthy(WITHIN);
            }
            for (int i = 0; i < proxies.size(); i++) {
                int p = i;
                await("proxy " + p + " lists every instance", WITHIN, () -> cluster.roles().stream()
                        .allMatch(role -> cluster.lists(p, role.instance())));
            }
        } catch (Exception | Error e) {
            cluster.close();
            throw e;
        }
        return cluster;
    }

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    @Override
    public List<String> bases() {
        return proxies.stream().map(RoleProcess::baseUrl).toList();
    }

    @Override
    public List<RoleProcess> roles() {
        List<RoleProcess> roles = new ArrayList<>();
        roles.add(prefill);
        roles.addAll(decodes);
        return roles;
    }

    /** The figures of one fault; {@code recovery_s} is the one the table shows. */
    record Figures(double recoverySeconds, Map<String, Double> figures) {
    }

    /**
     * Proxy 0 killed with {@code kill -9}, down for {@code downtime}, started again; the other keeps answering.
     * recovery_s: from the restarted proxy answering {@code /health} to its first completed request.
     */
    Figures proxyKill(Duration downtime) throws Exception {
        RoleProcess proxy = proxies.get(0);
        proxy.kill();
        Thread.sleep(downtime.toMillis());
        long started = System.nanoTime();
        proxy.start();
        proxy.awaitHealthy(WITHIN);
        long up = System.nanoTime();
        int tries = 0;
        long sent = System.nanoTime();
        while (!complete(proxy.baseUrl())) {
            tries++;
            sent = System.nanoTime();
            if (System.nanoTime() - up > WITHIN.toNanos()) {
                throw new IllegalStateException("the restarted proxy routed nothing within " + WITHIN.toSeconds() + " s");
            }
            Thread.sleep(10);
        }
        long routed = System.nanoTime();
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("restart_to_healthy_s", seconds(up - started));
        figures.put("healthy_to_first_routed_s", seconds(routed - up));
        figures.put("first_routed_request_took_s", seconds(routed - sent));
        figures.put("failed_tries_before_routed", (double) tries);
        return new Figures(seconds(routed - up), figures);
    }

    /**
     * etcd killed with {@code kill -9}, down for {@code downtime} (at least until both proxies say so), started again
     * on its data; the proxies route to their last members meanwhile. recovery_s: from etcd serving again until both
     * proxies say they are connected (read the prefix again and watch it).
     */
    Figures etcdRestart(Duration downtime) throws Exception {
        long killed = System.nanoTime();
        etcd.kill();
        await("both proxies report etcd down", WITHIN, () -> connected(0) == Boolean.FALSE
                && connected(1) == Boolean.FALSE);
        long seenDown = System.nanoTime();
        long rest = downtime.toNanos() - (seenDown - killed);
        if (rest > 0) {
            Thread.sleep(rest / 1_000_000);
        }
        etcd.startAgain();
        long serving = System.nanoTime();
        await("both proxies reconnect", WITHIN, () -> connected(0) == Boolean.TRUE && connected(1) == Boolean.TRUE);
        long back = System.nanoTime();
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("kill_to_both_report_down_s", seconds(seenDown - killed));
        figures.put("etcd_down_s", seconds(serving - killed));
        figures.put("serving_to_both_connected_s", seconds(back - serving));
        return new Figures(seconds(back - serving), figures);
    }

    /**
     * Decode 1 frozen with {@code kill -STOP} until its lease has ended and both proxies dropped it, then resumed with
     * {@code kill -CONT}; it registers again by itself. recovery_s: from the resume until both proxies list it again.
     */
    Figures instancePause() throws Exception {
        RoleProcess decode = decodes.get(1);
        Instance instance = decode.instance();
        long paused = System.nanoTime();
        decode.pause();
        long dropped;
        try {
            await("both proxies drop the paused decode", WITHIN, () -> !lists(0, instance) && !lists(1, instance));
            dropped = System.nanoTime();
        } finally {
            decode.resume();
        }
        long resumed = System.nanoTime();
        await("both proxies list the resumed decode again", WITHIN, () -> lists(0, instance) && lists(1, instance));
        long back = System.nanoTime();
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("lease_ttl_s", (double) LEASE_TTL_SECONDS);
        figures.put("pause_to_dropped_by_both_s", seconds(dropped - paused));
        figures.put("paused_s", seconds(resumed - paused));
        figures.put("resume_to_listed_by_both_s", seconds(back - resumed));
        return new Figures(seconds(back - resumed), figures);
    }

    /**
     * A decode that accepts connections and never answers (on both its ports), registered in etcd with a signed record
     * and a lease of its own; the proxies' health checks eject it, and it is revoked after the fault. recovery_s: from
     * its registration until both proxies have ejected it.
     */
    Figures blackholeInstance() throws Exception {
        Instance instance = new Instance(Role.DECODE, blackhole(), blackhole());
        EtcdClient client = EtcdClient.of(List.of(etcd.endpoint()));
        blackholes.add(client);
        long lease = client.grant(Duration.ofSeconds(60)).block(WITHIN);
        MemberRecord record = new MemberRecord(NAME, instance, Incarnation.next(), lease);
        client.put(record.key(), record.encode(RegistrationAuth.of(NotifyAuth.of(secret))), lease).block(WITHIN);
        long registered = System.nanoTime();
        await("both proxies list the blackhole", WITHIN, () -> lists(0, instance) && lists(1, instance));
        long listed = System.nanoTime();
        await("both proxies eject the blackhole", WITHIN, () -> ejected(0, instance) && ejected(1, instance));
        long ejected = System.nanoTime();
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("registered_to_listed_by_both_s", seconds(listed - registered));
        figures.put("registered_to_ejected_by_both_s", seconds(ejected - registered));
        // the blackhole's record stays until the load is over, ejected; then its lease is revoked
        blackholes.add(() -> client.revoke(lease).block(WITHIN));
        return new Figures(seconds(ejected - registered), figures);
    }

    /** Ends what the last fault left registered (the blackhole). */
    @Override
    public void afterFault() throws Exception {
        for (AutoCloseable c : blackholes.reversed()) {
            c.close();
        }
        blackholes.clear();
    }

    /** An address on loopback that accepts connections and never answers. */
    private InetSocketAddress blackhole() throws IOException {
        ServerSocket socket = new ServerSocket(0, 512, InetAddress.getLoopbackAddress());
        List<Socket> held = new CopyOnWriteArrayList<>();
        Thread.ofVirtual().start(() -> {
            while (!socket.isClosed()) {
                try {
                    held.add(socket.accept());
                } catch (IOException closed) {
                    return;
                }
            }
        });
        blackholes.add(() -> {
            socket.close();
            for (Socket s : held) {
                s.close();
            }
        });
        return InetSocketAddress.createUnresolved("127.0.0.1", socket.getLocalPort());
    }

    /** Whether proxy {@code p}'s {@code /health} lists {@code instance}. */
    private boolean lists(int p, Instance instance) {
        return lists(proxies.get(p), instance);
    }

    /** Whether {@code proxy}'s {@code /health} lists {@code instance}. */
    static boolean lists(RoleProcess proxy, Instance instance) {
        JsonNode health = health(proxy);
        if (health == null) {
            return false;
        }
        for (JsonNode listed : health.path(instance.role().wireName())) {
            if (listed.path("http").asText().equals(Instance.hostPort(instance.httpAddress()))) {
                return true;
            }
        }
        return false;
    }

    /** Whether proxy {@code p} says etcd is connected; null when its {@code /health} cannot be read. */
    private Boolean connected(int p) {
        return connected(proxies.get(p));
    }

    /** Whether {@code proxy} says etcd is connected; null when its {@code /health} cannot be read. */
    static Boolean connected(RoleProcess proxy) {
        JsonNode health = health(proxy);
        return health == null ? null : health.path("membership").path("connected").asBoolean();
    }

    /** {@code proxy}'s {@code /health}, or null when it cannot be read. */
    static JsonNode health(RoleProcess proxy) {
        try {
            String body = proxy.health();
            return body == null ? null : HttpJson.MAPPER.readTree(body);
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** Whether proxy {@code p}'s {@code /health} lists {@code instance} as ejected. */
    private boolean ejected(int p, Instance instance) {
        JsonNode health = health(proxies.get(p));
        if (health == null) {
            return false;
        }
        for (JsonNode listed : health.path(instance.role().wireName())) {
            if (listed.path("http").asText().equals(Instance.hostPort(instance.httpAddress()))) {
                return listed.path("ejected").asBoolean();
            }
        }
        return false;
    }

    /** One completion through {@code base}: whether it answered 200. */
    private boolean complete(String base) throws InterruptedException {
        return complete(base, requestTimeout);
    }

    /** One completion through {@code base}, given {@code requestTimeout}: whether it answered 200. */
    static boolean complete(String base, Duration requestTimeout) throws InterruptedException {
        try {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
                    .timeout(requestTimeout).POST(HttpRequest.BodyPublishers.ofString(
                            "{\"prompt\": \"w w w w\", \"max_tokens\": 2}")).build(), HttpResponse.BodyHandlers.ofString());
            return res.statusCode() == 200;
        } catch (IOException e) {
            return false;
        }
    }

    static void await(String what, Duration within, BooleanSupplier done) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - until > 0) {
                throw new IllegalStateException("not within " + within.toSeconds() + " s: " + what);
            }
            Thread.sleep(10);
        }
    }

    static double seconds(long nanos) {
        return Math.round(nanos / 1e6) / 1000.0;
    }

    @Override
    public void close() throws Exception {
        afterFault();
        for (RoleProcess proxy : proxies) {
            proxy.close();
        }
        for (RoleProcess role : roles()) {
            role.close();
        }
        etcd.close();
    }
}
