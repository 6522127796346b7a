package dev.kvflux.tools.chaos;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

/**
 * The membership cluster across hosts of {@link Netns}: three etcd members ({@link #MEMBERS}), each on a host of its
 * own, a prefill and a decode on theirs that keep their records in etcd (leases of {@value #LEASE_TTL_SECONDS} s), and
 * two proxies ({@link #PROXIES}) on theirs that read and watch it; every role its own JVM, all with one notify secret.
 * The load comes from the client host to both proxies in turn. Each fault ({@link EtcdHostFault}) is a method here that
 * cuts links while the load runs, heals them, measures how the cluster recovers and returns the figures. Not
 * thread-safe: one fault at a time.
 */
final class NetnsEtcdCluster implements EtcdFaultRun.Cluster {
    /** The etcd members' hosts, one member each. */
    static final List<String> MEMBERS = List.of("etcda", "etcdb", "etcdc");
    /** The proxies' hosts. */
    static final List<String> PROXIES = List.of("proxya", "proxyb");
    /**
     * The instances' lease TTL: longer than a keep-alive's interval (a third of it) plus one member's request timeout
     * (2 s), so that an instance whose member is cut off renews through another in time.
     */
    static final int LEASE_TTL_SECONDS = 4;
    /** The ports on each host: every host has its own, so they are fixed. */
    private static final int HTTP_PORT = 8100;
    private static final int NOTIFY_PORT = 8200;
    private static final int PROXY_PORT = 8000;
    private static final int PROXY_DISCOVERY_PORT = 8001;
    private static final Duration WITHIN = Duration.ofSeconds(60);
    private static final long POLL_MS = 20;
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(500)).build();

    private final Netns hosts;
    private final List<EtcdProcess> members;
    private final RoleProcess prefill;
    private final RoleProcess decode;
    private final List<RoleProcess> proxies;
    private final Duration requestTimeout;

    private NetnsEtcdCluster(Netns hosts, List<EtcdProcess> members, RoleProcess prefill, RoleProcess decode,
            List<RoleProcess> proxies, Duration requestTimeout) {
        this.hosts = hosts;
        this.members = members;
        this.prefill = prefill;
        this.decode = decode;
        this.proxies = proxies;
        this.requestTimeout = requestTimeout;
    }

    /**
     * Starts the etcd members, the roles (with {@code prefillArgs} and {@code decodeArgs} beside their membership) and
     * the proxies (with {@code proxyArgs}) on their hosts, logging under {@code logDir}, and waits until both proxies
     * list both instances.
     */
    static NetnsEtcdCluster start(Netns hosts, Path logDir, List<String> prefillArgs, List<String> decodeArgs,
            List<String> proxyArgs, Duration requestTimeout) throws Exception {
        String initial = MEMBERS.stream().map(m -> EtcdProcess.peerUrl(m, hosts.address(m)))
                .collect(Collectors.joining(","));
        List<EtcdProcess> members = new ArrayList<>();
        for (String m : MEMBERS) {
            members.add(EtcdProcess.member(logDir.resolve("hosts-" + m), m, hosts.address(m), hosts.exec(m), initial));
        }
        byte[] random = new byte[16];
        new SecureRandom().nextBytes(random);
        Map<String, String> env = Map.of(NotifyAuth.ENV, HexFormat.of().formatHex(random));
        List<String> membership = List.of("--discovery", "etcd://" + MEMBERS.stream()
                .map(m -> hosts.address(m) + ":" + EtcdProcess.MEMBER_CLIENT_PORT).collect(Collectors.joining(",")),
                "--cluster", EtcdCluster.NAME);
        List<String> roleMembership = concat(membership, List.of("--lease-ttl", LEASE_TTL_SECONDS + "s"));
        RoleProcess prefill = role(hosts, Role.PREFILL, "prefill", concat(prefillArgs, roleMembership), logDir, env);
        RoleProcess decode = role(hosts, Role.DECODE, "decode", concat(decodeArgs, roleMembership), logDir, env);
        List<RoleProcess> proxies = new ArrayList<>();
        for (String p : PROXIES) {
            proxies.add(RoleProcess.proxy(hosts.address(p), hosts.exec(p), PROXY_PORT, PROXY_DISCOVERY_PORT,
                    concat(proxyArgs, membership), logDir.resolve("hosts-" + p + ".log")).withEnvironment(env));
        }
        NetnsEtcdCluster cluster = new NetnsEtcdCluster(hosts, List.copyOf(members), prefill, decode,
                List.copyOf(proxies), requestTimeout);
        try {
            // a member serves once a quorum has elected a leader: start all three, then wait
            for (EtcdProcess member : members) {
                member.launch();
            }
            for (EtcdProcess member : members) {
                member.awaitServing();
            }
            List<RoleProcess> all = new ArrayList<>(cluster.roles());
            all.addAll(proxies);
            for (RoleProcess role : all) {
                role.start();
            }
            for (RoleProcess role : all) {
                role.awaitHealthy(WITHIN);
            }
            EtcdCluster.await("both proxies list both instances", WITHIN, cluster::everyProxyListsEveryInstance);
        } catch (Exception | Error e) {
            cluster.close();
            throw e;
        }
        return cluster;
    }

    private static RoleProcess role(Netns hosts, Role role, String host, List<String> args, Path logDir,
            Map<String, String> env) {
        return new RoleProcess(role, hosts.address(host), hosts.exec(host), HTTP_PORT, NOTIFY_PORT, args,
                logDir.resolve("hosts-" + host + ".log")).withEnvironment(env);
    }

    private static List<String> concat(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    @Override
    public List<String> bases() {
        return proxies.stream().map(RoleProcess::baseUrl).toList();
    }

    @Override
    public List<RoleProcess> roles() {
        return List.of(prefill, decode);
    }

    @Override
    public void afterFault() {
        // each fault heals what it cut before it returns
    }

    /**
     * Proxy a cut from all three members for {@code lasts}; proxy b keeps its links. Figures: when proxy a said etcd
     * was down (-1 if not within the cut), and from the heal until it is connected, lists what proxy b lists, and has
     * routed a request, the longest of which is recovery_s.
     */
    EtcdCluster.Figures proxyEtcdCut(Duration lasts) throws Exception {
        RoleProcess cut = proxies.get(0);
        String host = PROXIES.get(0);
        long struck = System.nanoTime();
        double reportedDown;
        List<String> done = new ArrayList<>();
        try {
            for (String member : MEMBERS) {
                hosts.cut(host, member);
                done.add(member);
            }
            struck = System.nanoTime();
            reportedDown = within(struck, lasts, () -> EtcdCluster.connected(cut) == Boolean.FALSE);
            sleepUntil(struck + lasts.toNanos());
        } finally {
            heal(host, done);
        }
        long healed = System.nanoTime();
        Map<String, BooleanSupplier> after = new LinkedHashMap<>();
        after.put("heal_to_connected_s", () -> EtcdCluster.connected(cut) == Boolean.TRUE);
        after.put("heal_to_same_view_s", this::sameView);
        after.put("heal_to_routed_s", routes(cut));
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("cut_to_reported_down_s", reportedDown);
        return recovered(healed, after, figures);
    }

    /**
     * The etcd leader cut from the other two members for {@code lasts}. Figures: which member led (0 to 2), when the
     * other two agreed on a new leader (-1 if not within the cut), the fewest instances either proxy listed meanwhile,
     * and from the heal until the three agree on one leader and until both proxies are connected, list both instances
     * and have routed a request, the longest of which is recovery_s.
     */
    EtcdCluster.Figures leaderIsolated(Duration lasts) throws Exception {
        Map<String, String> ids = new LinkedHashMap<>();
        Set<String> named = new HashSet<>();
        EtcdCluster.await("every etcd member names one leader", WITHIN, () -> {
            ids.clear();
            named.clear();
            for (String m : MEMBERS) {
                JsonNode status = status(m);
                if (status == null) {
                    return false;
                }
                ids.put(m, status.path("header").path("member_id").asText());
                named.add(leaderId(status));
            }
            return named.size() == 1 && !named.contains("0");
        });
        String leaderId = named.iterator().next();
        String leader = ids.entrySet().stream().filter(e -> e.getValue().equals(leaderId)).map(Map.Entry::getKey)
                .findFirst().orElseThrow(() -> new IllegalStateException("etcd's leader " + leaderId
                        + " is none of its members " + ids));
        List<String> others = MEMBERS.stream().filter(m -> !m.equals(leader)).toList();
        double newLeader = -1;
        int fewestListed = Integer.MAX_VALUE;
        List<String> done = new ArrayList<>();
        try {
            for (String other : others) {
                hosts.cut(leader, other);
                done.add(other);
            }
            long struck = System.nanoTime();
            while (System.nanoTime() - struck < lasts.toNanos()) {
                if (newLeader < 0 && agreeOnLeader(others, id -> !id.equals(leaderId))) {
                    newLeader = EtcdCluster.seconds(System.nanoTime() - struck);
                }
                for (RoleProcess proxy : proxies) {
                    fewestListed = Math.min(fewestListed, listed(proxy));
                }
                Thread.sleep(POLL_MS);
            }
        } finally {
            heal(leader, done);
        }
        long healed = System.nanoTime();
        Map<String, BooleanSupplier> after = new LinkedHashMap<>();
        after.put("heal_to_one_leader_s", () -> agreeOnLeader(MEMBERS, id -> true));
        after.put("heal_to_both_proxies_list_both_s", () -> proxies.stream()
                .allMatch(p -> EtcdCluster.connected(p) == Boolean.TRUE) && everyProxyListsEveryInstance());
        after.put("heal_to_routed_by_proxy_a_s", routes(proxies.get(0)));
        after.put("heal_to_routed_by_proxy_b_s", routes(proxies.get(1)));
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("leader_member", (double) MEMBERS.indexOf(leader));
        figures.put("cut_to_new_leader_s", newLeader);
        figures.put("fewest_instances_listed_by_a_proxy", (double) fewestListed);
        return recovered(healed, after, figures);
    }

    /**
     * Decode killed, prefill and decode cut from each other, decode started again after {@code downtime} while cut,
     * and healed once the cut has lasted {@code lasts} (or decode is healthy, if later). Figures: the restart until
     * decode is healthy, how long the cut lasted, and from the heal until both proxies have routed a request, the
     * longest of which is recovery_s. (Both proxies may list the restarted decode before it registers again: the
     * killed one's record lasts until its lease ends, at the same address.)
     */
    EtcdCluster.Figures decodeRestartPartitioned(Duration lasts, Duration downtime) throws Exception {
        decode.kill();
        long struck = System.nanoTime();
        long restarted;
        long healthy;
        boolean cut = false;
        try {
            hosts.cut("prefill", "decode");
            cut = true;
            struck = System.nanoTime();
            Thread.sleep(downtime.toMillis());
            restarted = System.nanoTime();
            decode.start();
            decode.awaitHealthy(WITHIN);
            healthy = System.nanoTime();
            sleepUntil(struck + lasts.toNanos());
        } finally {
            if (cut) {
                hosts.heal("prefill", "decode");
            }
        }
        long healed = System.nanoTime();
        Map<String, BooleanSupplier> after = new LinkedHashMap<>();
        after.put("heal_to_routed_by_proxy_a_s", routes(proxies.get(0)));
        after.put("heal_to_routed_by_proxy_b_s", routes(proxies.get(1)));
        Map<String, Double> figures = new LinkedHashMap<>();
        figures.put("restart_to_healthy_s", EtcdCluster.seconds(healthy - restarted));
        figures.put("cut_lasted_s", EtcdCluster.seconds(healed - struck));
        return recovered(healed, after, figures);
    }

    /** Heals {@code host}'s links to each of {@code others}, each even if another fails. */
    private void heal(String host, List<String> others) throws IOException {
        IOException failed = null;
        for (String other : others) {
            try {
                hosts.heal(host, other);
            } catch (IOException e) {
                if (failed == null) {
                    failed = e;
                } else {
                    failed.addSuppressed(e);
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    /** Seconds from {@code from} until {@code done}, polled for at most {@code within}; -1 if it never was. */
    private static double within(long from, Duration within, BooleanSupplier done) throws InterruptedException {
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - from >= within.toNanos()) {
                return -1;
            }
            Thread.sleep(POLL_MS);
        }
        return EtcdCluster.seconds(System.nanoTime() - from);
    }

    private static void sleepUntil(long nanos) throws InterruptedException {
        long rest = nanos - System.nanoTime();
        if (rest > 0) {
            Thread.sleep(Duration.ofNanos(rest));
        }
    }

    /**
     * The figures with, for each of {@code after}'s conditions, the seconds from {@code healed} until it first held (all
     * polled together, each round in order, for up to a minute); recovery_s is the longest of them.
     */
    private static EtcdCluster.Figures recovered(long healed, Map<String, BooleanSupplier> after,
            Map<String, Double> figures) throws InterruptedException {
        Map<String, Long> held = new LinkedHashMap<>();
        while (held.size() < after.size()) {
            for (Map.Entry<String, BooleanSupplier> c : after.entrySet()) {
                if (!held.containsKey(c.getKey()) && c.getValue().getAsBoolean()) {
                    held.put(c.getKey(), System.nanoTime());
                }
            }
            if (held.size() < after.size()) {
                if (System.nanoTime() - healed > WITHIN.toNanos()) {
                    throw new IllegalStateException("not within " + WITHIN.toSeconds() + " s of the heal: "
                            + after.keySet().stream().filter(k -> !held.containsKey(k)).toList());
                }
                Thread.sleep(POLL_MS);
            }
        }
        long last = healed;
        for (String name : after.keySet()) {
            figures.put(name, EtcdCluster.seconds(held.get(name) - healed));
            last = Math.max(last, held.get(name));
        }
        return new EtcdCluster.Figures(EtcdCluster.seconds(last - healed), figures);
    }

    /** Whether a completion sent through {@code proxy} now succeeds. */
    private BooleanSupplier routes(RoleProcess proxy) {
        return () -> {
            try {
                return EtcdCluster.complete(proxy.baseUrl(), requestTimeout);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        };
    }

    /** Whether both proxies list prefill and decode. */
    private boolean everyProxyListsEveryInstance() {
        return proxies.stream().allMatch(p -> roles().stream().allMatch(r -> EtcdCluster.lists(p, r.instance())));
    }

    /** Whether both proxies' {@code /health} can be read and list the same instances. */
    private boolean sameView() {
        Set<String> a = view(proxies.get(0));
        return a != null && a.equals(view(proxies.get(1)));
    }

    /** The instances {@code proxy} lists, as role and address; null when its {@code /health} cannot be read. */
    private static Set<String> view(RoleProcess proxy) {
        JsonNode health = EtcdCluster.health(proxy);
        if (health == null) {
            return null;
        }
        Set<String> view = new HashSet<>();
        for (Role role : Role.values()) {
            for (JsonNode listed : health.path(role.wireName())) {
                view.add(role.wireName() + " " + listed.path("http").asText());
            }
        }
        return view;
    }

    /** How many instances {@code proxy} lists; 0 when its {@code /health} cannot be read. */
    private static int listed(RoleProcess proxy) {
        Set<String> view = view(proxy);
        return view == null ? 0 : view.size();
    }

    /** Whether {@code names}' members all name one leader, and it passes {@code accepted}. */
    private boolean agreeOnLeader(List<String> names, java.util.function.Predicate<String> accepted) {
        Set<String> leaders = new HashSet<>();
        for (String m : names) {
            JsonNode status = status(m);
            if (status == null) {
                return false;
            }
            leaders.add(leaderId(status));
        }
        String one = leaders.iterator().next();
        return leaders.size() == 1 && !one.equals("0") && accepted.test(one);
    }

    /** The leader's id in a member's {@link #status}: "0" when it knows none. */
    static String leaderId(JsonNode status) {
        return status.path("leader").asText("0");
    }

    /** Member {@code m}'s answer to etcd's {@code /v3/maintenance/status}; null when it gives none within 500 ms. */
    private JsonNode status(String m) {
        return status(hosts, m);
    }

    /**
     * The answer of the member on {@code hosts}' host {@code m} to etcd's {@code /v3/maintenance/status} (its
     * {@code header.member_id}, and {@code leader}: the id of the leader it knows, "0" for none); null when it gives
     * none within 500 ms.
     */
    static JsonNode status(Netns hosts, String m) {
        try {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + hosts.address(m) + ":"
                    + EtcdProcess.MEMBER_CLIENT_PORT + "/v3/maintenance/status")).timeout(Duration.ofMillis(500))
                    .POST(HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString());
            return res.statusCode() == 200 ? HttpJson.MAPPER.readTree(res.body()) : null;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    @Override
    public void close() throws Exception {
        List<AutoCloseable> all = new java.util.ArrayList<>(proxies);
        all.add(prefill);
        all.add(decode);
        all.addAll(members);
        Exception first = null;
        for (AutoCloseable each : all) { // every process is stopped, whichever fails to
            try {
                each.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
