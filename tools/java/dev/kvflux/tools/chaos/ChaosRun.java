package dev.kvflux.tools.chaos;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.proxy.InstanceHealth;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;

/**
 * The fault matrix: for each fault, a prefill and a decode, each its own JVM on loopback (shared by the
 * faults whose prefill takes the same options, and settled between them), behind a fresh in-process proxy; a closed-loop load of {@code requests} requests through the proxy while the fault is
 * injected; then, once both roles have had time to settle (the receive deadline and the block lease plus a margin), what each role
 * still holds. The faults on etcd run instead through {@link EtcdFaultRun}: the membership faults
 * ({@link ChaosFault.Membership}) on an {@link EtcdCluster} (a real etcd, a prefill, two decodes and two proxies, each its
 * own JVM, the load going to both proxies in turn), those across hosts ({@link EtcdHostFault}) on a
 * {@link NetnsEtcdCluster} (three etcd members, two proxies, a prefill and a decode, each on a host of its own).
 *
 * <p>Per fault it counts, from the client's side: {@code completed} (200 with exactly the expected tokens),
 * {@code failed_cleanly} (an error status with a JSON error naming a reason), {@code failed_without_reason}
 * (a connection cut or a body without a reason), {@code cancelled_by_client} (the load's own disconnects),
 * {@code never_finished} (no answer within the request timeout), {@code corrupt_outputs} (200 with other
 * tokens, plus the KV decode's content check caught, whose requests failed instead); and from the roles' {@code /metrics} after settling: {@code leaked_blocks} (KV blocks not free,
 * prefill plus decode) and {@code leaked_handles} (transfers, write places and requests still held, and on the C
 * simulator the engines' native handles, sessions and mappings of the other role's memory beyond what they keep at rest).
 * {@code recovery_s}: after a restart, the time from the restarted role being healthy until the first
 * request started after it succeeds (-1 when none did); for an interleaved fault (disconnects, rejections,
 * a burst, status failures, stalls and late statuses, scatter/gather under load, mistreated notifications), the longest time from a disturbed request's end until the next success;
 * for a fault on etcd, what the fault measured ({@link EtcdCluster}: a restarted proxy's first routed request after
 * it is up, both proxies connected again after etcd is back, a paused decode listed again after it resumed, a blackhole
 * ejected by both proxies), with its other figures in {@link FaultResult#figures()}.
 */
public final class ChaosRun {
    /** Decode's checks of write_done's checksum; {@code result="corrupt"} counts KV that failed it. */
    private static final String CORRUPT_KV = "kvflux_decode_kv_checks_total";
    /** The layers of the roles' simulated model: one batch each per request. */
    static final int LAYERS = 4;

    /** The faults, in the order they run. */
    public static final List<String> FAULTS = ChaosFault.all().stream().map(ChaosFault::label).toList();
    /**
     * The faults that cut links between hosts of their own ({@link Netns}): {@code kvflux chaos --hosts netns}; the last
     * ({@link EtcdHostFault}) on etcd members and proxies of their own too.
     */
    public static final List<String> PARTITION_FAULTS = java.util.stream.Stream.concat(
            ChaosFault.Partition.LABELS.stream(), EtcdHostFault.LABELS.stream()).toList();
    /** The faults across hosts that run on etcd members of their own, last. */
    public static final List<String> ETCD_HOST_FAULTS = EtcdHostFault.LABELS;
    /** The hosts of {@code --hosts netns}, in the order of their addresses: the load and the in-process proxy first. */
    public static final List<String> HOSTS = java.util.stream.Stream.of(List.of("client", "prefill", "decode"),
            NetnsEtcdCluster.PROXIES, NetnsEtcdCluster.MEMBERS).flatMap(List::stream).toList();
    /** The faults that run on a real etcd ({@link EtcdProcess}), last. */
    public static final List<String> MEMBERSHIP_FAULTS = java.util.Arrays.stream(ChaosFault.Membership.values())
            .map(ChaosFault::label).toList();

    /** What to run; {@code gpu} is the roles' GPU on the GPU backends (cuda, hip, mori). */
    public record Settings(int requests, int concurrency, Duration transferTimeout, int promptWords, int maxTokens,
                           List<String> faults, Path logDir, String backend, KvMode kvMode, TpRanks tp, int gpu) {
        public Settings {
            Objects.requireNonNull(tp, "tp");
            Objects.requireNonNull(transferTimeout, "transferTimeout");
            Objects.requireNonNull(logDir, "logDir");
            Objects.requireNonNull(backend, "backend");
            Objects.requireNonNull(kvMode, "kvMode");
            faults = List.copyOf(faults);
            if (requests < 3) {
                throw new IllegalArgumentException("--requests must be at least 3 (one third before, during and"
                        + " after each fault), got " + requests);
            }
            if (concurrency < 1) {
                throw new IllegalArgumentException("--concurrency must be at least 1, got " + concurrency);
            }
            faults.forEach(ChaosFault::named);
        }

        /** With one rank per role. */
        public Settings(int requests, int concurrency, Duration transferTimeout, int promptWords, int maxTokens,
                List<String> faults, Path logDir, String backend, KvMode kvMode) {
            this(requests, concurrency, transferTimeout, promptWords, maxTokens, faults, logDir, backend, kvMode,
                    TpRanks.SINGLE, 0);
        }

        /** On the default backend, the simulated xGMI engine, in WRITE mode. */
        public Settings(int requests, int concurrency, Duration transferTimeout, int promptWords, int maxTokens,
                List<String> faults, Path logDir) {
            this(requests, concurrency, transferTimeout, promptWords, maxTokens, faults, logDir, "sim-xgmi", KvMode.WRITE);
        }

        /** The faults to run, in order. */
        List<ChaosFault> chaosFaults() {
            return faults.stream().map(ChaosFault::named).toList();
        }

        /** The batches a fault's load posts: one per layer and request. */
        int batches() {
            return LAYERS * requests;
        }

        /** Decode's receive deadline: the transfer timeout plus 5 s. */
        Duration receiveDeadline() {
            return transferTimeout.plusSeconds(5);
        }

        /** Decode's block lease: twice the transfer timeout. */
        Duration blockLease() {
            return transferTimeout.multipliedBy(2);
        }

        /** How long the load waits for one answer. */
        Duration requestTimeout() {
            return receiveDeadline().plusSeconds(10);
        }
    }

    /** One fault's figures. */
    public record FaultResult(String fault, int requests, int completed, int failedCleanly, int neverFinished,
                              long leakedBlocks, long leakedHandles, int corruptOutputs, double recoverySeconds,
                              int failedWithoutReason, int cancelledByClient, Map<String, Integer> reasons,
                              Map<String, Double> figures) {
        /** The figures a fault measures beyond the columns (the membership faults'), by name; empty for the others. */
        public FaultResult {
            figures = Collections.unmodifiableMap(new LinkedHashMap<>(figures));
        }

        /** What in this result breaks what every fault must keep, or what it promises; empty when clean. */
        public List<String> violations() {
            return Verdict.of(this);
        }
    }

    private final Settings settings;
    private final ChaosLoad load;
    /** Running role pairs by prefill and decode options. */
    private final Map<List<String>, RoleProcess[]> pairs = new java.util.HashMap<>();
    /** A port nothing listens on, for the roles' --proxy (the harness registers them itself). */
    private int deadProxy;
    /** Where prefill and decode run: hosts of their own, or null for this host's loopback. */
    private final Netns hosts;
    /** The notify secret of the roles and the proxy on hosts of their own; null on loopback. */
    private final String secret;
    /** The faults on etcd, on loopback or across hosts: their cluster is started at the first of them. */
    private final EtcdFaultRun onEtcd;

    public ChaosRun(Settings settings) {
        this(settings, null);
    }

    /**
     * On {@code hosts}, when not null: this process on {@code client} (the proxy and the load), prefill and decode each
     * on its host; only the {@link ChaosFault.Partition} faults run there, and only there.
     */
    public ChaosRun(Settings settings, Netns hosts) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.load = new ChaosLoad(settings);
        this.hosts = hosts;
        // off loopback the roles take requests and notifications signed with the cluster's secret only
        byte[] random = new byte[32];
        new java.security.SecureRandom().nextBytes(random);
        this.secret = hosts == null ? null : java.util.HexFormat.of().formatHex(random);
        this.onEtcd = new EtcdFaultRun(settings, load, hosts, this::settle);
        for (ChaosFault fault : settings.chaosFaults()) {
            if (PARTITION_FAULTS.contains(fault.label()) != (hosts != null)) {
                throw new IllegalArgumentException(hosts == null
                        ? fault.label() + " needs hosts of their own: run it with --hosts netns"
                        : "--hosts netns runs the partition faults only (" + String.join(", ",
                                PARTITION_FAULTS) + "); " + fault.label() + " runs on loopback");
            }
        }
    }

    /**
     * Runs every fault in turn; {@code progress} gets one line per step. Faults whose prefill needs the same
     * options share one prefill and decode (started once, settled between faults, restarted by the restart
     * faults); each fault gets its own proxy.
     */
    public List<FaultResult> run(Consumer<String> progress) throws Exception {
        Files.createDirectories(settings.logDir());
        List<FaultResult> results = new ArrayList<>();
        try {
            for (ChaosFault fault : settings.chaosFaults()) {
                progress.accept("fault " + fault.label() + ": " + settings.requests() + " requests");
                FaultResult result = runFault(fault);
                progress.accept("fault " + fault.label() + ": " + result);
                results.add(result);
            }
        } finally {
            for (RoleProcess[] pair : pairs.values()) {
                pair[0].close();
                pair[1].close();
            }
            onEtcd.close();
        }
        return results;
    }

    /** The running decode and prefill for these prefill options, started (and logged under {@code fault}) if none. */
    private RoleProcess[] pair(ChaosFault fault, List<String> prefillArgs, List<String> decodeArgs) throws Exception {
        List<String> key = new ArrayList<>(prefillArgs);
        key.add("|");
        key.addAll(decodeArgs);
        RoleProcess[] pair = pairs.get(key);
        for (int attempt = 1; pair == null; attempt++) {
            RoleProcess[] started = {
                new RoleProcess(Role.DECODE, address("decode"), exec("decode"), freePort(),
                        RoleProcess.freePorts(settings.tp().decodeTp()), decodeArgs,
                        settings.logDir().resolve(fault.label() + "-decode.log")).withEnvironment(secretEnv()),
                new RoleProcess(Role.PREFILL, address("prefill"), exec("prefill"), freePort(),
                        RoleProcess.freePorts(settings.tp().prefillTp()), prefillArgs,
                        settings.logDir().resolve(fault.label() + "-prefill.log")).withEnvironment(secretEnv())};
            try {
                started[0].start();
                started[1].start();
                started[0].awaitHealthy(Duration.ofSeconds(60));
                started[1].awaitHealthy(Duration.ofSeconds(60));
                pair = started;
                pairs.put(List.copyOf(key), pair);
            } catch (IllegalStateException e) {
                started[0].close();
                started[1].close();
                // a port found free can be taken by another process's outgoing connection before the role binds
                // it: the role then exits at once; try again on other ports
                if (attempt == 3 || !e.getMessage().contains("before it was healthy")) {
                    throw e;
                }
            }
        }
        return pair;
    }

    private Map<String, String> secretEnv() {
        return secret == null ? Map.of() : Map.of(dev.kvflux.transfer.notify.NotifyAuth.ENV, secret);
    }

    private String address(String host) {
        return hosts == null ? "127.0.0.1" : hosts.address(host);
    }

    private List<String> exec(String host) {
        return hosts == null ? List.of() : hosts.exec(host);
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    /** The options both roles run with, beyond their membership. */
    private static final List<String> COMMON = List.of("--layers", Integer.toString(LAYERS), "--decode-step", "5ms");

    private List<String> common() {
        List<String> args = new ArrayList<>(COMMON);
        args.addAll(List.of("--backend", settings.backend(), "--kv-mode", settings.kvMode().wireName()));
        if (List.of("cuda", "hip", "mori").contains(settings.backend())) {
            args.addAll(List.of("--gpu", Integer.toString(settings.gpu())));
        }
        return args;
    }

    private List<String> decodeArgs(List<String> membership) {
        return decodeArgs(membership, null);
    }

    /** Decode's options; in READ mode they carry the fault's injected status faults, as decode posts the copies. */
    private List<String> decodeArgs(List<String> membership, ChaosFault fault) {
        List<String> args = new ArrayList<>(membership);
        args.addAll(common());
        args.addAll(List.of("--receive-deadline", settings.receiveDeadline().toMillis() + "ms",
                "--block-lease", settings.blockLease().toMillis() + "ms",
                "--transfer-timeout", settings.transferTimeout().toMillis() + "ms",
                "--tp", Integer.toString(settings.tp().decodeTp()), "--peer-tp", Integer.toString(settings.tp().prefillTp())));
        if (fault != null && settings.kvMode() == KvMode.READ) {
            args.addAll(oneRank(injected(fault.prefillArgs(settings), true), settings.tp().decodeTp()));
        }
        return args;
    }

    /** The {@code --inject-fault} options of {@code args} ({@code wanted}), or all the others. */
    private static List<String> injected(List<String> args, boolean wanted) {
        List<String> kept = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            boolean inject = args.get(i).equals("--inject-fault") && i + 1 < args.size();
            if (inject == wanted) {
                kept.add(args.get(i));
                if (inject) {
                    kept.add(args.get(i + 1));
                }
            }
            if (inject) {
                i++;
            }
        }
        return kept;
    }

    private List<String> prefillArgs(List<String> membership, ChaosFault fault) {
        List<String> args = new ArrayList<>(membership);
        args.addAll(common());
        args.addAll(List.of("--transfer-timeout", settings.transferTimeout().toMillis() + "ms",
                "--tp", Integer.toString(settings.tp().prefillTp()), "--peer-tp", Integer.toString(settings.tp().decodeTp())));
        // in READ mode decode posts the copies, so the injected status faults go to its engine
        args.addAll(settings.kvMode() == KvMode.READ ? injected(fault.prefillArgs(settings), false)
                : oneRank(fault.prefillArgs(settings), settings.tp().prefillTp()));
        return args;
    }

    /**
     * {@code args} with every {@code --inject-fault} aimed at the last of {@code tp} ranks only, so that with ranks
     * the fault strikes one rank's copies and the others' must end with it.
     */
    private static List<String> oneRank(List<String> args, int tp) {
        if (tp == 1) {
            return args;
        }
        List<String> aimed = new ArrayList<>(args);
        for (int i = 0; i + 1 < aimed.size(); i++) {
            if (aimed.get(i).equals("--inject-fault")) {
                aimed.set(i + 1, aimed.get(i + 1) + "@" + (tp - 1));
            }
        }
        return aimed;
    }

    private FaultResult runFault(ChaosFault fault) throws Exception {
        if (EtcdFaultRun.runs(fault)) {
            return onEtcd.run(fault, prefillArgs(List.of(), fault), decodeArgs(List.of()), downtime());
        }
        if (deadProxy == 0) {
            deadProxy = freePort();
        }
        List<String> toProxy = List.of("--proxy", "http://127.0.0.1:" + deadProxy);
        List<String> decodeArgs = decodeArgs(toProxy, fault);
        List<String> prefillArgs = prefillArgs(toProxy, fault);
        InstanceRegistry registry = new InstanceRegistry(Duration.ofHours(1));
        List<NotifyRelay> relays = new ArrayList<>();
        try (AutoCloseable closeRelays = () -> {
                 for (NotifyRelay relay : relays) {
                     relay.close();
                 }
             };
             ProxyServer proxy = proxyFor(fault, registry, secret, settings.receiveDeadline().plusSeconds(2))) {
            RoleProcess[] pair = pair(fault, prefillArgs, decodeArgs);
            RoleProcess decode = pair[0];
            RoleProcess prefill = pair[1];
            long corruptBefore = decode.metrics().count(CORRUPT_KV, "result", "corrupt");
            if (fault.relay().isEmpty()) {
                registry.ping(decode.instance());
                registry.ping(prefill.instance());
            } else {
                ChaosFault.Relay relay = fault.relay().get();
                // with ranks, the relay stands before each role's last rank only: one rank's notices mistreated
                registry.ping(NotifyRelay.relayed(decode.instance(), relay, relays));
                registry.ping(NotifyRelay.relayed(prefill.instance(), relay, relays));
            }
            String base = "http://127.0.0.1:" + proxy.address().getPort();
            long[] faultEnd = {Long.MIN_VALUE};
            List<ChaosLoad.Result> results = load.run(fault, List.of(base), () -> {
                fault.strike(hosts, prefill, decode, downtime());
                faultEnd[0] = System.nanoTime();
            });
            Leaks leaks = settle(List.of(prefill, decode)).corruptSince(corruptBefore);
            return FaultSummary.of(fault, results, fault.restarts() ? faultEnd[0] : Long.MIN_VALUE, leaks, Double.NaN,
                    dev.kvflux.tools.chaos.history.HistoryCheck.figures(settings.logDir(), fault.label()));
        }
    }

    /**
     * The proxy of a fault on one prefill and one decode. A relay fault registers the roles at a relay's notify address,
     * which the health checks rightly drop as only claimed (the instance there reports its own): those faults run with
     * the checks an hour apart.
     */
    private static ProxyServer proxyFor(ChaosFault fault, InstanceRegistry registry, String secret,
            Duration firstByte) {
        // it gives up on a decode's first byte before the load gives up on its answer, as the etcd cluster's proxies
        ProxyServer.Builder proxy = ProxyServer.builder().registry(registry).firstByteTimeout(firstByte)
                .registrationSecret(secret == null ? null : dev.kvflux.transfer.notify.NotifyAuth.of(secret));
        if (fault.relay().isPresent()) {
            proxy.healthChecks(Duration.ofHours(1), InstanceHealth.defaults());
        }
        return proxy.bindNow();
    }

    /** How long a killed role stays down before its restart: 1 s, or half the transfer timeout if shorter. */
    private Duration downtime() {
        Duration half = settings.transferTimeout().dividedBy(2);
        return half.compareTo(Duration.ofSeconds(1)) < 0 ? half : Duration.ofSeconds(1);
    }

    /** What both roles still held after settling: KV blocks, handles, and KV that failed decode's content check. */
    record Leaks(int blocks, int handles, long corrupt) {
        /** These leaks with only the corrupt KV counted since decode's count stood at {@code before}. */
        Leaks corruptSince(long before) {
            return new Leaks(blocks, handles, corrupt - before);
        }
    }

    /**
     * Waits until both roles hold nothing (up to the receive deadline plus the block lease, decode's longest
     * quarantine, plus the transfer timeout plus 5 s), then reads what they still hold; -1 blocks and
     * handles if their metrics could not be read.
     */
    /** As described above, for a prefill ({@code roles.get(0)}) and its decodes (the rest). */
    Leaks settle(List<RoleProcess> roles) throws InterruptedException {
        long until = System.nanoTime() + settings.receiveDeadline().plus(settings.blockLease())
                .plus(settings.transferTimeout()).plusSeconds(5).toNanos();
        Leaks held = new Leaks(-1, -1, 0);
        while (System.nanoTime() - until < 0) {
            try {
                PrometheusText p = roles.get(0).metrics();
                long blocks = heldBlocks(p);
                int decodes = roles.size() - 1;
                // at rest each link keeps one session open between the ranks it joins
                int links = settings.tp().links();
                long handles = p.count("kvflux_prefill_transfers_running") + p.count("kvflux_prefill_writes_in_flight")
                        + engineLeaks(p, "kvflux_prefill_decode_sessions_open", decodes * links,
                                settings.tp().prefillTp());
                long corrupt = 0;
                for (RoleProcess decode : roles.subList(1, roles.size())) {
                    PrometheusText d = decode.metrics();
                    blocks += heldBlocks(d);
                    handles += d.count("kvflux_decode_requests_running")
                            + engineLeaks(d, "kvflux_decode_prefill_sessions_open", links, settings.tp().decodeTp());
                    corrupt += d.count(CORRUPT_KV, "result", "corrupt");
                }
                held = new Leaks(Math.toIntExact(blocks), Math.toIntExact(handles), corrupt);
                if (held.blocks() == 0 && held.handles() == 0) {
                    break;
                }
            } catch (IOException e) {
                // a role still starting; read again
            }
            Thread.sleep(50);
        }
        return held;
    }

    /**
     * What a role's engine holds beyond what it needs at rest, where it counts it: its own engine and region (2
     * native handles) plus a session and the imported region (2 more) per session into a peer ({@code sessions}:
     * prefill's into decodes in WRITE mode, decode's into prefills in READ mode), at most one session per running
     * peer ({@code peers}), and no more mappings of the peers' memory than sessions. Statuses are released when their
     * transfer drains, so any handle beyond that is a leak.
     */
    private static long engineLeaks(PrometheusText role, String sessionsMetric, int peers, int engines) {
        long sessions = role.count(sessionsMetric);
        long leaks = Math.max(0, sessions - peers)
                + Math.max(0, role.count("kvflux_engine_peer_mappings_open") - sessions);
        if (role.sum("kvflux_engine_handles_open") > 0) {
            // each rank's engine keeps its engine and memory handles; each session two more
            leaks += Math.max(0, role.count("kvflux_engine_handles_open") - 2L * engines - 2 * sessions);
        }
        return leaks;
    }

    /** KV blocks not free (allocated, writing or quarantined). */
    private static long heldBlocks(PrometheusText metrics) {
        return metrics.count("kvflux_blocks_capacity") - metrics.count("kvflux_blocks", "state", "free");
    }
}
