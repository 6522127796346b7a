package dev.kvflux.tools.chaos;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * The fault matrix: for each fault, a prefill and a decode, each its own JVM on loopback (shared by the
 * faults whose prefill takes the same options, and settled between them), behind a fresh in-process proxy; a closed-loop load of {@code requests} requests through the proxy while the fault is
 * injected; then, once both roles have had time to settle (the receive deadline and the block lease plus a margin), what each role
 * still holds. The membership faults ({@link ChaosFault.Membership}) run instead on an {@link EtcdCluster}: a real
 * etcd, a prefill, two decodes and two proxies, each its own JVM, the load going to both proxies in turn.
 *
 * <p>Per fault it counts, from the client's side: {@code completed} (200 with exactly the expected tokens),
 * {@code failed_cleanly} (an error status with a JSON error naming a reason), {@code failed_without_reason}
 * (a connection cut or a body without a reason), {@code cancelled_by_client} (the load's own disconnects),
 * {@code never_finished} (no answer within the request timeout), {@code corrupt_outputs} (200 with other
 * tokens, plus the KV decode's content check caught, whose requests failed instead); and from the roles' {@code /metrics} after settling: {@code leaked_blocks} (KV blocks not free,
 * prefill plus decode) and {@code leaked_handles} (transfers, write places and requests still held).
 * {@code recovery_s}: after a restart, the time from the restarted role being healthy until the first
 * request started after it succeeds (-1 when none did); for an interleaved fault (disconnects, rejections,
 * a burst, status failures, stalls and late statuses, scatter/gather under load, mistreated notifications), the longest time from a disturbed request's end until the next success;
 * for a membership fault, what the fault measured ({@link EtcdCluster}: a restarted proxy's first routed request after
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
    /** The faults that run on a real etcd ({@link EtcdProcess}), last. */
    public static final List<String> MEMBERSHIP_FAULTS = java.util.Arrays.stream(ChaosFault.Membership.values())
            .map(ChaosFault::label).toList();

    /** What to run. */
    public record Settings(int requests, int concurrency, Duration transferTimeout, int promptWords, int maxTokens,
                           List<String> faults, Path logDir) {
        public Settings {
            Objects.requireNonNull(transferTimeout, "transferTimeout");
            Objects.requireNonNull(logDir, "logDir");
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
    }

    enum Outcome { COMPLETED, FAILED_CLEANLY, FAILED_WITHOUT_REASON, CANCELLED, NEVER_FINISHED, CORRUPT }

    /** One request's outcome; {@code via}: the proxy that answered it (0 unless there are several). */
    private record Result(int index, long startNanos, long endNanos, Outcome outcome, String reason, int via) {
        Result(int index, long startNanos, long endNanos, Outcome outcome, String reason) {
            this(index, startNanos, endNanos, outcome, reason, 0);
        }

        Result via(int proxy) {
            return new Result(index, startNanos, endNanos, outcome, reason, proxy);
        }
    }

    private final Settings settings;
    /** Running role pairs by prefill options. */
    private final Map<List<String>, RoleProcess[]> pairs = new java.util.HashMap<>();
    /** A port nothing listens on, for the roles' --proxy (the harness registers them itself). */
    private int deadProxy;
    /** The cluster of the membership faults, started at the first of them. */
    private EtcdCluster etcdCluster;

    public ChaosRun(Settings settings) {
        this.settings = Objects.requireNonNull(settings, "settings");
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
            if (etcdCluster != null) {
                etcdCluster.close();
            }
        }
        return results;
    }

    /** The running decode and prefill for these prefill options, started (and logged under {@code fault}) if none. */
    private RoleProcess[] pair(ChaosFault fault, List<String> prefillArgs, List<String> decodeArgs) throws Exception {
        RoleProcess[] pair = pairs.get(prefillArgs);
        if (pair == null) {
            pair = new RoleProcess[] {
                new RoleProcess(Role.DECODE, freePort(), freePort(), decodeArgs,
                        settings.logDir().resolve(fault.label() + "-decode.log")),
                new RoleProcess(Role.PREFILL, freePort(), freePort(), prefillArgs,
                        settings.logDir().resolve(fault.label() + "-prefill.log"))};
            pairs.put(List.copyOf(prefillArgs), pair);
            pair[0].start();
            pair[1].start();
            pair[0].awaitHealthy(Duration.ofSeconds(60));
            pair[1].awaitHealthy(Duration.ofSeconds(60));
        }
        return pair;
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    /** The options both roles run with, beyond their membership. */
    private static final List<String> COMMON = List.of("--layers", Integer.toString(LAYERS), "--decode-step", "5ms");

    private List<String> decodeArgs(List<String> membership) {
        List<String> args = new ArrayList<>(membership);
        args.addAll(COMMON);
        args.addAll(List.of("--receive-deadline", settings.receiveDeadline().toMillis() + "ms",
                "--block-lease", settings.blockLease().toMillis() + "ms"));
        return args;
    }

    private List<String> prefillArgs(List<String> membership, ChaosFault fault) {
        List<String> args = new ArrayList<>(membership);
        args.addAll(COMMON);
        args.addAll(List.of("--transfer-timeout", settings.transferTimeout().toMillis() + "ms"));
        args.addAll(fault.prefillArgs(settings));
        return args;
    }

    /**
     * A membership fault: on the etcd cluster (started at the first such fault, shared by the rest), the load through
     * both proxies while the fault strikes; its recovery is what the fault measured.
     */
    private FaultResult runOnEtcd(ChaosFault.Membership fault) throws Exception {
        if (etcdCluster == null) {
            // the proxies give up on a decode's first byte before the load gives up on its answer
            etcdCluster = EtcdCluster.start(settings.logDir(), prefillArgs(List.of(), fault), decodeArgs(List.of()),
                    List.of("--first-byte-timeout", settings.receiveDeadline().plusSeconds(2).toMillis() + "ms"),
                    settings.requestTimeout());
        }
        List<RoleProcess> roles = etcdCluster.roles();
        long corruptBefore = 0;
        for (RoleProcess decode : roles.subList(1, roles.size())) {
            corruptBefore += decode.metrics().count(CORRUPT_KV, "result", "corrupt");
        }
        EtcdCluster.Figures[] figures = new EtcdCluster.Figures[1];
        List<Result> results;
        try {
            results = load(fault, etcdCluster.bases(), () -> figures[0] = fault.strike(etcdCluster, downtime()));
        } finally {
            etcdCluster.afterFault();
        }
        Leaks leaks = settle(roles).corruptSince(corruptBefore);
        Map<String, Double> all = new java.util.LinkedHashMap<>(figures[0].figures());
        for (int p = 0; p < etcdCluster.bases().size(); p++) {
            int proxy = p;
            all.put("requests_via_proxy_" + p, (double) results.stream().filter(r -> r.via == proxy).count());
            all.put("completed_via_proxy_" + p, (double) results.stream()
                    .filter(r -> r.via == proxy && r.outcome == Outcome.COMPLETED).count());
        }
        return summarise(fault, results, Long.MIN_VALUE, leaks, figures[0].recoverySeconds(), all);
    }

    private FaultResult runFault(ChaosFault fault) throws Exception {
        if (fault instanceof ChaosFault.Membership membership) {
            return runOnEtcd(membership);
        }
        if (deadProxy == 0) {
            deadProxy = freePort();
        }
        List<String> toProxy = List.of("--proxy", "http://127.0.0.1:" + deadProxy);
        List<String> decodeArgs = decodeArgs(toProxy);
        List<String> prefillArgs = prefillArgs(toProxy, fault);
        InstanceRegistry registry = new InstanceRegistry(Duration.ofHours(1));
        List<NotifyRelay> relays = new ArrayList<>();
        try (AutoCloseable closeRelays = () -> {
                 for (NotifyRelay relay : relays) {
                     relay.close();
                 }
             };
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            RoleProcess[] pair = pair(fault, prefillArgs, decodeArgs);
            RoleProcess decode = pair[0];
            RoleProcess prefill = pair[1];
            long corruptBefore = decode.metrics().count(CORRUPT_KV, "result", "corrupt");
            if (fault.relay().isEmpty()) {
                registry.ping(decode.instance());
                registry.ping(prefill.instance());
            } else {
                ChaosFault.Relay relay = fault.relay().get();
                relays.add(new NotifyRelay(decode.instance().notifyAddress().getPort(), relay.mode(), relay.every()));
                relays.add(new NotifyRelay(prefill.instance().notifyAddress().getPort(), relay.mode(), relay.every()));
                registry.ping(new Instance(Role.DECODE, decode.instance().httpAddress(),
                        InetSocketAddress.createUnresolved("127.0.0.1", relays.get(0).port())));
                registry.ping(new Instance(Role.PREFILL, prefill.instance().httpAddress(),
                        InetSocketAddress.createUnresolved("127.0.0.1", relays.get(1).port())));
            }
            String base = "http://127.0.0.1:" + proxy.address().getPort();
            long[] faultEnd = {Long.MIN_VALUE};
            List<Result> results = load(fault, List.of(base), () -> {
                fault.act(prefill, decode, downtime());
                faultEnd[0] = System.nanoTime();
            });
            Leaks leaks = settle(List.of(prefill, decode)).corruptSince(corruptBefore);
            return summarise(fault, results, fault.restarts() ? faultEnd[0] : Long.MIN_VALUE, leaks, Double.NaN, Map.of());
        }
    }

    /** How long a killed role stays down before its restart: 1 s, or half the transfer timeout if shorter. */
    private Duration downtime() {
        Duration half = settings.transferTimeout().dividedBy(2);
        return half.compareTo(Duration.ofSeconds(1)) < 0 ? half : Duration.ofSeconds(1);
    }

    /** A blocking fault action, run once a third of the requests have started. */
    private interface FaultAction {
        void run() throws Exception;
    }

    /** The load: request {@code i} goes to {@code bases.get(i % bases.size())}. */
    private List<Result> load(ChaosFault fault, List<String> bases, FaultAction action) throws InterruptedException {
        int n = settings.requests();
        int burstFrom = n / 3;
        int burstTo = fault.bursts() ? 2 * n / 3 : burstFrom;
        ConnectionProvider pool = ConnectionProvider.builder("kvflux-chaos").maxConnections(n + 16)
                .pendingAcquireMaxCount(-1).build();
        HttpClient http = HttpClient.create(pool);
        List<Result> results = Collections.synchronizedList(new ArrayList<>());
        long t0 = System.nanoTime();
        Thread[] faulting = new Thread[1];
        java.util.concurrent.atomic.AtomicReference<IllegalStateException> failed =
                new java.util.concurrent.atomic.AtomicReference<>();
        Sinks.Empty<Void> faultDone = Sinks.empty();
        int afterFault = Math.max(burstTo, 2 * n / 3);
        Flux<Integer> steady = Flux.range(0, n).filter(i -> i < burstFrom || i >= burstTo);
        Mono<Void> steadyLoad = steady.flatMap(i -> {
            if (i == burstFrom && faulting[0] == null) {
                faulting[0] = Thread.ofPlatform().name("kvflux-chaos-fault").start(() -> {
                    try {
                        action.run();
                    } catch (Exception | Error e) {
                        failed.set(new IllegalStateException("fault " + fault.label() + " could not be injected: "
                                + e.getMessage(), e));
                    } finally {
                        faultDone.tryEmitEmpty();
                    }
                });
            }
            Mono<Result> one = Mono.defer(() -> request(http, bases, fault, i)).doOnNext(results::add);
            // the last third goes out only once the fault is over, so there is an "after" to measure
            return i >= afterFault ? faultDone.asMono().then(one) : one;
        }, settings.concurrency()).then();
        Mono<Void> burstLoad = Flux.range(burstFrom, burstTo - burstFrom)
                .flatMap(i -> request(http, bases, fault, i).doOnNext(results::add), Math.max(1, burstTo - burstFrom))
                .then()
                .doFinally(signal -> {
                    if (burstTo > burstFrom) {
                        faultDone.tryEmitEmpty();
                    }
                });
        // the burst goes out all at once when the steady load reaches it
        Mono<Void> delayedBurst = Mono.defer(() -> burstLoad).delaySubscription(Flux.interval(Duration.ofMillis(5))
                .filter(tick -> results.size() >= burstFrom || faulting[0] != null).next());
        Mono.when(steadyLoad, delayedBurst).block();
        if (faulting[0] != null) {
            faulting[0].join();
        }
        pool.dispose();
        if (failed.get() != null) {
            throw failed.get();
        }
        return new ArrayList<>(results);
    }

    /**
     * Request {@code i} through proxy {@code i % bases.size()}; when that proxy refuses the connection (it is down), the
     * next one, as a client behind a load balancer would be sent on. A request cut after it was sent is not sent again.
     */
    private Mono<Result> request(HttpClient http, List<String> bases, ChaosFault fault, int i) {
        int first = i % bases.size();
        Mono<Result> answer = request(http, bases.get(first), fault, i).map(r -> r.via(first));
        for (int k = 1; k < bases.size(); k++) {
            int next = (first + k) % bases.size();
            answer = answer.flatMap(r -> r.outcome == Outcome.FAILED_WITHOUT_REASON && "ConnectRefused".equals(r.reason)
                    ? request(http, bases.get(next), fault, i).map(again -> again.via(next)) : Mono.just(r));
        }
        return answer;
    }

    private Mono<Result> request(HttpClient http, String base, ChaosFault fault, int i) {
        boolean invalid = fault.request(i) == ChaosFault.Request.INVALID;
        boolean disconnect = fault.request(i) == ChaosFault.Request.DISCONNECT;
        boolean burst = fault.bursts() && i >= settings.requests() / 3 && i < 2 * settings.requests() / 3;
        String body = invalid ? invalidBody(i) : HttpJson.write(HttpJson.MAPPER.createObjectNode()
                .put("prompt", "w ".repeat(burst ? settings.promptWords() * 16 : settings.promptWords()).trim())
                .put("max_tokens", settings.maxTokens()).put("stream", false));
        long start = System.nanoTime();
        Mono<Result> answer = http.post().uri(base + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> classify(i, start, res.status().code(), text)))
                .timeout(settings.requestTimeout(), Schedulers.parallel())
                .onErrorResume(e -> Mono.just(new Result(i, start, System.nanoTime(),
                        e instanceof TimeoutException ? Outcome.NEVER_FINISHED : Outcome.FAILED_WITHOUT_REASON,
                        e instanceof TimeoutException ? "no answer" : e instanceof java.net.ConnectException
                                ? "ConnectRefused" : e.getClass().getSimpleName())));
        if (disconnect) {
            Duration after = Duration.ofMillis(ThreadLocalRandom.current().nextInt(1, 30));
            return Mono.firstWithSignal(answer, Mono.delay(after, Schedulers.parallel())
                    .map(tick -> new Result(i, start, System.nanoTime(), Outcome.CANCELLED, "client went away")));
        }
        return answer;
    }

    private static String invalidBody(int i) {
        return switch ((i / 3) % 4) {
            case 0 -> "{\"max_tokens\": 4}";
            case 1 -> "{\"prompt\": \"a b\", \"max_tokens\": -1}";
            case 2 -> "{\"prompt\": ";
            default -> "{\"prompt\": 42}";
        };
    }

    private Result classify(int i, long start, int status, String text) {
        long end = System.nanoTime();
        if (status == 200) {
            try {
                JsonNode json = HttpJson.MAPPER.readTree(text);
                String got = json.path("choices").path(0).path("text").asText(null);
                StringBuilder expected = new StringBuilder();
                for (int t = 0; t < settings.maxTokens(); t++) {
                    expected.append(" t").append(t);
                }
                return new Result(i, start, end, expected.toString().equals(got) ? Outcome.COMPLETED : Outcome.CORRUPT,
                        "200");
            } catch (IOException e) {
                return new Result(i, start, end, Outcome.CORRUPT, "200 with a body that is not JSON");
            }
        }
        try {
            JsonNode error = HttpJson.MAPPER.readTree(text).path("error");
            String message = error.path("message").asText("");
            if (!message.isBlank()) {
                return new Result(i, start, end, Outcome.FAILED_CLEANLY, status + " " + error.path("code").asText("?"));
            }
        } catch (IOException e) {
            // no JSON: no reason
        }
        return new Result(i, start, end, Outcome.FAILED_WITHOUT_REASON, status + " without a reason");
    }

    /** What both roles still held after settling: KV blocks, handles, and KV that failed decode's content check. */
    private record Leaks(int blocks, int handles, long corrupt) {
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
    private Leaks settle(List<RoleProcess> roles) throws InterruptedException {
        long until = System.nanoTime() + settings.receiveDeadline().plus(settings.blockLease())
                .plus(settings.transferTimeout()).plusSeconds(5).toNanos();
        Leaks held = new Leaks(-1, -1, 0);
        while (System.nanoTime() - until < 0) {
            try {
                PrometheusText p = roles.get(0).metrics();
                long blocks = heldBlocks(p);
                long handles = p.count("kvflux_prefill_transfers_running") + p.count("kvflux_prefill_writes_in_flight");
                long corrupt = 0;
                for (RoleProcess decode : roles.subList(1, roles.size())) {
                    PrometheusText d = decode.metrics();
                    blocks += heldBlocks(d);
                    handles += d.count("kvflux_decode_requests_running");
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

    /** KV blocks not free (allocated, writing or quarantined). */
    private static long heldBlocks(PrometheusText metrics) {
        return metrics.count("kvflux_blocks_capacity") - metrics.count("kvflux_blocks", "state", "free");
    }

    /**
     * The fault's figures; {@code measuredRecovery} (seconds), when not NaN, is the recovery the fault measured itself,
     * and {@code figures} go with it.
     */
    private static FaultResult summarise(ChaosFault fault, List<Result> results, long faultEnd, Leaks leaks,
            double measuredRecovery, Map<String, Double> figures) {
        Map<Outcome, Integer> counts = new java.util.EnumMap<>(Outcome.class);
        Map<String, Integer> reasons = new TreeMap<>();
        for (Result r : results) {
            counts.merge(r.outcome, 1, Integer::sum);
            if (r.outcome != Outcome.COMPLETED) {
                reasons.merge(r.reason, 1, Integer::sum);
            }
        }
        double recovery;
        if (!Double.isNaN(measuredRecovery)) {
            recovery = measuredRecovery;
        } else if (faultEnd != Long.MIN_VALUE) {
            // a restart: until the first request started after it succeeds
            recovery = results.stream().filter(r -> r.outcome == Outcome.COMPLETED && r.startNanos >= faultEnd)
                    .mapToLong(r -> r.endNanos - faultEnd).min().orElse(-1_000_000_000L) / 1e9;
        } else {
            // an interleaved fault: the longest wait from a disturbed request's end to the next success
            long[] successes = results.stream().filter(r -> r.outcome == Outcome.COMPLETED)
                    .mapToLong(Result::endNanos).sorted().toArray();
            long worst = 0;
            for (Result r : results) {
                if (r.outcome == Outcome.COMPLETED) {
                    continue;
                }
                int at = java.util.Arrays.binarySearch(successes, r.endNanos);
                int next = at >= 0 ? at : -at - 1;
                if (next < successes.length) {
                    worst = Math.max(worst, successes[next] - r.endNanos);
                }
            }
            recovery = worst / 1e9;
        }
        return new FaultResult(fault.label(), results.size(), counts.getOrDefault(Outcome.COMPLETED, 0),
                counts.getOrDefault(Outcome.FAILED_CLEANLY, 0), counts.getOrDefault(Outcome.NEVER_FINISHED, 0),
                leaks.blocks(), leaks.handles(), counts.getOrDefault(Outcome.CORRUPT, 0) + (int) leaks.corrupt(),
                Math.round(recovery * 1000) / 1000.0,
                counts.getOrDefault(Outcome.FAILED_WITHOUT_REASON, 0), counts.getOrDefault(Outcome.CANCELLED, 0),
                reasons, figures);
    }
}
