package dev.kvflux.tools.bench;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.FirstToken;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyEvent;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;

/**
 * The serving benchmark: for each policy and each concurrency, a fresh proxy, prefill and decode on
 * loopback (in this process, talking HTTP and the notify channel over TCP as separate processes would),
 * fresh engines (the simulated xGMI engine, or the C simulator through FFM, whose copies move every block's bytes
 * and whose decode checks them), and the {@link LoadGenerator}. Runs one after another; each ends within its
 * request bound.
 */
public final class ServeBench {

    /**
     * What to run.
     *
     * @param numPrompts prompts per concurrency, paired by position (one value applies to all)
     * @param receiveDeadline decode's deadline under the kvflux policy; null for the default
     * @param requestTimeout how long the client keeps a request open before counting it as never finished
     * @param notifyAuth the secret prefill and decode sign their notifications with; null for none
     */
    public record Settings(List<Policy> policies, List<Integer> concurrencies, List<Integer> numPrompts,
                           int inputTokens, int outputTokens, Duration transferTimeout, Duration receiveDeadline,
                           boolean sgUnderLoad, FaultPlan faults, ServingModel model, Duration requestTimeout,
                           long seed, int warmupRequests, NotifyAuth notifyAuth, Roles roles, List<KvMode> kvModes,
                           List<TpRanks> tpPairs) {
        /** The backends serve-bench runs in its own process. */
        public static final List<String> IN_PROCESS = List.of(SimulatedXgmiEngine.BACKEND, "native-sim");
        /** The backends whose roles run on a GPU, and so as processes of their own. */
        public static final List<String> GPU_BACKENDS = List.of("cuda", "hip", "mori");

        /** On the simulated xGMI engine, in this process. */
        public Settings(List<Policy> policies, List<Integer> concurrencies, List<Integer> numPrompts, int inputTokens,
                int outputTokens, Duration transferTimeout, Duration receiveDeadline, boolean sgUnderLoad,
                FaultPlan faults, ServingModel model, Duration requestTimeout, long seed, int warmupRequests,
                NotifyAuth notifyAuth) {
            this(policies, concurrencies, numPrompts, inputTokens, outputTokens, transferTimeout, receiveDeadline,
                    sgUnderLoad, faults, model, requestTimeout, seed, warmupRequests, notifyAuth, Roles.IN_PROCESS);
        }

        /** Over roles of one rank each. */
        public Settings(List<Policy> policies, List<Integer> concurrencies, List<Integer> numPrompts, int inputTokens,
                int outputTokens, Duration transferTimeout, Duration receiveDeadline, boolean sgUnderLoad,
                FaultPlan faults, ServingModel model, Duration requestTimeout, long seed, int warmupRequests,
                NotifyAuth notifyAuth, Roles roles, List<KvMode> kvModes) {
            this(policies, concurrencies, numPrompts, inputTokens, outputTokens, transferTimeout, receiveDeadline,
                    sgUnderLoad, faults, model, requestTimeout, seed, warmupRequests, notifyAuth, roles, kvModes,
                    List.of(TpRanks.SINGLE));
        }

        /** In WRITE mode only. */
        public Settings(List<Policy> policies, List<Integer> concurrencies, List<Integer> numPrompts, int inputTokens,
                int outputTokens, Duration transferTimeout, Duration receiveDeadline, boolean sgUnderLoad,
                FaultPlan faults, ServingModel model, Duration requestTimeout, long seed, int warmupRequests,
                NotifyAuth notifyAuth, Roles roles) {
            this(policies, concurrencies, numPrompts, inputTokens, outputTokens, transferTimeout, receiveDeadline,
                    sgUnderLoad, faults, model, requestTimeout, seed, warmupRequests, notifyAuth, roles,
                    List.of(KvMode.WRITE));
        }

        public Settings {
            Objects.requireNonNull(roles, "roles");
            kvModes = List.copyOf(kvModes);
            tpPairs = List.copyOf(tpPairs);
            if (tpPairs.isEmpty()) {
                throw new IllegalArgumentException("give at least one TP pair (--prefill-tp and --decode-tp)");
            }
            if (kvModes.isEmpty()) {
                throw new IllegalArgumentException("give at least one KV mode (--kv-mode write, read or write,read)");
            }
            if (sgUnderLoad && kvModes.contains(KvMode.READ)) {
                throw new IllegalArgumentException("--sg-under-load is prefill's write copy path; READ mode does not"
                        + " run it (leave it out, or run --kv-mode write)");
            }
            Objects.requireNonNull(faults, "faults");
            if (!IN_PROCESS.contains(roles.backend()) && !GPU_BACKENDS.contains(roles.backend())) {
                throw new IllegalArgumentException("serve-bench runs its roles on " + String.join(", ", IN_PROCESS)
                        + " (in this process or with --processes) or " + String.join(", ", GPU_BACKENDS)
                        + " (as processes); not on '" + roles.backend() + "'");
            }
            if (!roles.backend().equals(SimulatedXgmiEngine.BACKEND) && (sgUnderLoad || !faults.equals(FaultPlan.NONE))) {
                throw new IllegalArgumentException("--sg-under-load and --inject-failures act on the simulated xGMI"
                        + " engine in this process; leave them out with --backend " + roles.backend());
            }
            if (roles.processes() && (sgUnderLoad || !faults.equals(FaultPlan.NONE))) {
                throw new IllegalArgumentException("--sg-under-load and --inject-failures act on the simulated xGMI"
                        + " engine in this process; leave them out with --processes");
            }
            Objects.requireNonNull(policies, "policies");
            Objects.requireNonNull(transferTimeout, "transferTimeout");
            Objects.requireNonNull(faults, "faults");
            Objects.requireNonNull(model, "model");
            Objects.requireNonNull(requestTimeout, "requestTimeout");
            if (policies.isEmpty() || concurrencies.isEmpty() || numPrompts.isEmpty()) {
                throw new IllegalArgumentException("give at least one policy, one concurrency and one prompt count");
            }
            if (numPrompts.size() != 1 && numPrompts.size() != concurrencies.size()) {
                throw new IllegalArgumentException("--num-prompts has " + numPrompts.size() + " values for "
                        + concurrencies.size() + " concurrencies; give one value, or one per concurrency");
            }
            if (concurrencies.stream().anyMatch(c -> c == null || c < 1) || numPrompts.stream().anyMatch(n -> n == null || n < 1)
                    || inputTokens < 1 || outputTokens < 1 || warmupRequests < 0) {
                throw new IllegalArgumentException("concurrencies, prompt counts, input and output tokens must be at"
                        + " least 1 and warm-up requests at least 0, got " + concurrencies + ", " + numPrompts + ", "
                        + inputTokens + ", " + outputTokens + ", " + warmupRequests);
            }
            positive(transferTimeout, "transfer timeout");
            positive(requestTimeout, "request timeout");
            if (receiveDeadline != null) {
                positive(receiveDeadline, "receive deadline");
            }
        }

        private static void positive(Duration d, String what) {
            if (d.isZero() || d.isNegative()) {
                throw new IllegalArgumentException("the " + what + " must be greater than zero, got " + d);
            }
        }

        int promptsAt(int index) {
            return numPrompts.size() == 1 ? numPrompts.getFirst() : numPrompts.get(index);
        }

        /** The transfer engine the roles run on. */
        public String backend() {
            return roles.backend();
        }

        /** Whether the roles run as processes of their own. */
        public boolean processes() {
            return roles.processes();
        }

        /** KV blocks of each role, as processes. */
        public int kvBlocks() {
            return roles.kvBlocks();
        }

        /** The GPU both roles keep their KV on, on a GPU backend. */
        public int gpu() {
            return roles.gpu();
        }

        /** Decode's receive deadline under the kvflux policy. */
        public Duration kvfluxDeadline() {
            return receiveDeadline != null ? receiveDeadline : DecodeSide.defaultReceiveDeadline(transferTimeout);
        }
    }

    /**
     * Where and on what the roles run: {@code backend}; as processes of their own ({@code processes}, always on a
     * GPU backend) with {@code kvBlocks} blocks each, on GPU {@code gpu}, logging into {@code logs}.
     */
    public record Roles(String backend, boolean processes, int kvBlocks, int gpu, Path logs) {
        /** The simulated xGMI engine, in this process. */
        public static final Roles IN_PROCESS = new Roles(SimulatedXgmiEngine.BACKEND, false, 8192, 0, null);

        public Roles {
            Objects.requireNonNull(backend, "backend");
            processes = processes || Settings.GPU_BACKENDS.contains(backend);
            if (kvBlocks < 1 || gpu < 0) {
                throw new IllegalArgumentException("--kv-blocks must be at least 1 and --gpu at least 0, got "
                        + kvBlocks + " and " + gpu);
            }
        }
    }

    private static final java.util.concurrent.atomic.AtomicInteger RUNS = new java.util.concurrent.atomic.AtomicInteger();

    private final Settings settings;
    private final PrintStream progress;
    private FirstToken firstToken = FirstToken.DECODE;
    private int proxyMaxInFlight;
    /** The in-process prefill's transfer settings; its timeout is always the settings' transfer timeout. */
    private KvfluxConfig.Transfer transfer = KvfluxConfig.defaults().transfer();

    public ServeBench(Settings settings, PrintStream progress) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.progress = Objects.requireNonNull(progress, "progress");
    }

    /** The proxy's {@code --max-in-flight} ({@code --proxy-max-in-flight}); default 0, no limit. */
    public ServeBench proxyMaxInFlight(int n) {
        this.proxyMaxInFlight = n;
        return this;
    }

    /** Has the proxy give a streamed answer's first token from {@code source} ({@code --first-token}); default decode. */
    public ServeBench firstToken(FirstToken source) {
        this.firstToken = Objects.requireNonNull(source, "source");
        return this;
    }

    /**
     * The in-process prefill's {@code transfer} settings ({@code --config}'s: the slice, the fail mode, the requests in
     * flight, the event poll and its timeout, the stall time, {@code transfer.push-signal}); the transfer timeout stays
     * the settings'.
     */
    public ServeBench transfer(KvfluxConfig.Transfer transfer) {
        this.transfer = Objects.requireNonNull(transfer, "transfer");
        return this;
    }

    /**
     * How many warm-up requests are open at a time: the run's largest concurrency, at most all of them. A warm-up of
     * 1,000 requests at once would measure an overload the run never sees, and could eject its decode.
     */
    static int warmupConcurrency(int warmupRequests, List<Integer> concurrencies) {
        int largest = concurrencies.stream().mapToInt(Integer::intValue).max().orElse(1);
        return Math.max(1, Math.min(warmupRequests, largest));
    }

    /** Runs every policy at every concurrency and returns the rows in that order. */
    public List<BenchRow> run() {
        if (settings.warmupRequests() > 0) {
            int concurrency = warmupConcurrency(settings.warmupRequests(), settings.concurrencies());
            progress.printf("warm-up: %d requests on a kvflux stack, %d at a time (not reported)%n",
                    settings.warmupRequests(), concurrency);
            runOne(Policy.KVFLUX, settings.kvModes().getFirst(), settings.tpPairs().getFirst(), concurrency,
                    settings.warmupRequests(), FaultPlan.NONE, false);
        }
        List<BenchRow> rows = new ArrayList<>();
        for (TpRanks tp : settings.tpPairs()) {
            for (KvMode mode : settings.kvModes()) {
                for (Policy policy : settings.policies()) {
                    for (int i = 0; i < settings.concurrencies().size(); i++) {
                        rows.add(runOne(policy, mode, tp, settings.concurrencies().get(i), settings.promptsAt(i),
                                settings.faults(), true));
                    }
                }
            }
        }
        return rows;
    }

    private BenchRow runOne(Policy policy, KvMode mode, TpRanks tp, int concurrency, int prompts, FaultPlan faultPlan,
            boolean report) {
        if (settings.processes()) {
            return runInProcesses(policy, mode, tp, concurrency, prompts, report);
        }
        List<Fault> faults = faultPlan.faults(prompts, settings.model().layers(), settings.seed());
        List<DescribedEngine> engines = new ArrayList<>();
        List<DescribedEngine> decodeEngines = new ArrayList<>();
        int run = RUNS.incrementAndGet();
        for (int r = 0; r < Math.max(tp.prefillTp(), tp.decodeTp()); r++) {
            if (settings.backend().equals(SimulatedXgmiEngine.BACKEND)) {
                SimulatedXgmiEngine.Builder engineSettings = SimulatedXgmiEngine.builder()
                        .copyPath(settings.sgUnderLoad() ? CopyPath.SCATTER_GATHER : CopyPath.DEFAULT);
                // the injected failures strike whichever side posts the copies (prefill's writes, or decode's
                // reads), on rank 0
                SimulatedXgmiEngine.Builder decodeSettings = SimulatedXgmiEngine.builder();
                if (r == 0) {
                    faults.forEach(mode == KvMode.READ ? decodeSettings::fault : engineSettings::fault);
                }
                if (r < tp.prefillTp()) {
                    engines.add(engineSettings.build());
                }
                if (r < tp.decodeTp()) {
                    decodeEngines.add(decodeSettings.build());
                }
            } else {
                if (r < tp.prefillTp()) {
                    engines.add(NativeTransferEngine.simulated("serve-bench-prefill-" + run + "-r" + r));
                }
                if (r < tp.decodeTp()) {
                    decodeEngines.add(NativeTransferEngine.simulated("serve-bench-decode-" + run + "-r" + r));
                }
            }
        }
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10));
        HandoverLog handover = new HandoverLog();
        try (Engines closeEngines = new Engines(engines, decodeEngines);
             DecodeServer decode = DecodeServer.builder().model(settings.model()).engines(decodeEngines)
                     .tp(tp.decodeTp()).peerTp(tp.prefillTp()).kvMode(mode)
                     .transferTimeout(settings.transferTimeout())
                     .receiveDeadline(policy.decodeDeadline() ? settings.kvfluxDeadline() : null)
                     .auth(settings.notifyAuth()).handover(handover).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(settings.model()).policy(policy).engines(engines)
                     .tp(tp.prefillTp()).peerTp(tp.decodeTp()).kvMode(mode).transfer(transfer)
                     .transferTimeout(settings.transferTimeout()).notifyWithin(settings.kvfluxDeadline())
                     .auth(settings.notifyAuth()).handover(handover).bindNow();
             ProxyServer proxy = ProxyServer.builder().discoveryPort(0).registry(registry)
                     .registrationSecret(settings.notifyAuth()).handover(handover).firstToken(firstToken)
                     .maxInFlight(proxyMaxInFlight, ProxyServer.DEFAULT_MAX_QUEUED).bindNow()) {
            String url = "http://127.0.0.1:" + proxy.address().getPort();
            String discovery = "http://127.0.0.1:" + proxy.discoveryAddress().getPort();
            decode.pingProxy(discovery, Duration.ofSeconds(1));
            prefill.pingProxy(discovery, Duration.ofSeconds(1));
            awaitRegistration(registry);
            LoadResult result = load(url, policy, mode, concurrency, prompts, report);
            return new BenchRow(policy, concurrency, prompts, result, prefill.stats().failedWaitsInProgress(),
                    faults.size(), decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_FAILED),
                    decode.notifyMeters().count(NotifyEvent.DEADLINE_EXPIRED), mode, tp, handover.figures());
        }
    }

    /** The engines of one in-process run, closed after its roles. */
    private record Engines(List<DescribedEngine> prefill, List<DescribedEngine> decode) implements AutoCloseable {
        @Override
        public void close() {
            prefill.forEach(DescribedEngine::close);
            decode.forEach(DescribedEngine::close);
        }
    }

    /** Runs the load against the proxy at {@code url}, printing progress every 2 s. */
    private LoadResult load(String url, Policy policy, KvMode mode, int concurrency, int prompts, boolean report) {
        String label = String.format(Locale.ROOT, "[%s %s c=%d]", report ? policy.wireName() : "warm-up",
                mode.wireName(), concurrency);
        LoadGenerator load = new LoadGenerator(url, prompts, concurrency, settings.inputTokens(),
                settings.outputTokens(), settings.requestTimeout());
        Disposable[] ticker = new Disposable[1];
        long start = System.nanoTime();
        LoadResult result;
        try {
            result = load.run(live -> ticker[0] = Flux.interval(Duration.ofSeconds(2), Schedulers.parallel())
                    .subscribe(tick -> progress.printf(Locale.ROOT,
                            "%s %d/%d ended: %d completed, %d failed, %d never finished; %d open; %.1f s%n",
                            label, live.completed() + live.failed() + live.neverFinished(), prompts,
                            live.completed(), live.failed(), live.neverFinished(), live.open(),
                            (System.nanoTime() - start) / 1e9)));
        } finally {
            if (ticker[0] != null) {
                ticker[0].dispose();
            }
        }
        progress.printf(Locale.ROOT, "%s done in %.1f s: %d completed, %d failed, %d never finished%n", label,
                result.durationSeconds(), result.completed(), result.failed(), result.neverFinished());
        return result;
    }

    /**
     * {@link ProcessStack#start}, tried up to three times when a role exits before it is healthy: a port found free
     * can be taken by another process's outgoing connection before the role binds it.
     */
    private ProcessStack startStack(Policy policy, KvMode mode, TpRanks tp, Path logs, String name) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return ProcessStack.start(settings, policy, mode, tp, logs, name, firstToken, proxyMaxInFlight);
            } catch (IllegalStateException e) {
                if (attempt == 3 || e.getMessage() == null || !e.getMessage().contains("before it was healthy")) {
                    throw e;
                }
                progress.printf("[%s] %s; starting again on other ports%n", name, e.getMessage());
            }
        }
    }

    /** As {@link #runOne}, with the proxy and the roles as processes of their own ({@link ProcessStack}). */
    private BenchRow runInProcesses(Policy policy, KvMode mode, TpRanks tp, int concurrency, int prompts,
            boolean report) {
        String name = String.format(Locale.ROOT, "%s-%s-tp%d-%d-c%d-%d", report ? policy.wireName() : "warm-up",
                mode.wireName(), tp.prefillTp(), tp.decodeTp(), concurrency, RUNS.incrementAndGet());
        try {
            Path logs = settings.roles().logs() != null ? settings.roles().logs()
                    : java.nio.file.Files.createTempDirectory("kvflux-serve-bench-");
            java.nio.file.Files.createDirectories(logs);
            progress.printf("[%s] starting proxy, prefill and decode on %s as processes (logs in %s)%n", name,
                    settings.backend(), logs);
            try (ProcessStack stack = startStack(policy, mode, tp, logs, name)) {
                LoadResult result = load(stack.url(), policy, mode, concurrency, prompts, report);
                long[] figures = stack.figures();
                long checked = figures[3] + figures[4];
                progress.printf(Locale.ROOT, "[%s] decode checked the KV of %d requests: %d whole, %d corrupt;"
                        + " %.1f MB read back in %.3f s (%.2f ms a request)%n", name, checked, figures[3], figures[4],
                        figures[5] / 1e6, figures[6] / 1e6, checked == 0 ? 0.0 : figures[6] / 1e3 / checked);
                return new BenchRow(policy, concurrency, prompts, result, figures[0], 0, figures[1], figures[2], mode,
                        tp);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + name, e);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("serve-bench could not run " + name + ": " + e.getMessage(), e);
        } catch (Exception e) {
            throw new IllegalStateException(name + ": " + e.getMessage(), e);
        }
    }

    /** Blocks until a prefill and a decode instance are live in {@code registry}, for at most 10 s. */
    static void awaitRegistration(InstanceRegistry registry) {
        long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (registry.live(Role.PREFILL).isEmpty() || registry.live(Role.DECODE).isEmpty()) {
            if (System.nanoTime() - until > 0) {
                throw new IllegalStateException("prefill and decode did not register with the proxy within 10 s");
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for registration", e);
            }
        }
    }
}
