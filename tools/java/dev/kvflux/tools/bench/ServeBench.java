package dev.kvflux.tools.bench;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyEvent;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

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
                           long seed, int warmupRequests, NotifyAuth notifyAuth, String backend) {
        /** The backends serve-bench runs its roles on, in this process. */
        public static final List<String> BACKENDS = List.of(SimulatedXgmiEngine.BACKEND, "native-sim");

        /** On the simulated xGMI engine. */
        public Settings(List<Policy> policies, List<Integer> concurrencies, List<Integer> numPrompts, int inputTokens,
                int outputTokens, Duration transferTimeout, Duration receiveDeadline, boolean sgUnderLoad,
                FaultPlan faults, ServingModel model, Duration requestTimeout, long seed, int warmupRequests,
                NotifyAuth notifyAuth) {
            this(policies, concurrencies, numPrompts, inputTokens, outputTokens, transferTimeout, receiveDeadline,
                    sgUnderLoad, faults, model, requestTimeout, seed, warmupRequests, notifyAuth,
                    SimulatedXgmiEngine.BACKEND);
        }

        public Settings {
            Objects.requireNonNull(backend, "backend");
            if (!BACKENDS.contains(backend)) {
                throw new IllegalArgumentException("serve-bench runs its roles in one process, on " + String.join(" or ",
                        BACKENDS) + "; backend '" + backend + "' needs them in processes of their own: run kvflux"
                        + " proxy, prefill and decode with --backend " + backend);
            }
            if (!backend.equals(SimulatedXgmiEngine.BACKEND) && (sgUnderLoad || !faults.equals(FaultPlan.NONE))) {
                throw new IllegalArgumentException("--sg-under-load and --inject-failures act on the simulated xGMI"
                        + " engine; leave them out with --backend " + backend);
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

        /** Decode's receive deadline under the kvflux policy. */
        public Duration kvfluxDeadline() {
            return receiveDeadline != null ? receiveDeadline : DecodeSide.defaultReceiveDeadline(transferTimeout);
        }
    }

    private static final java.util.concurrent.atomic.AtomicInteger RUNS = new java.util.concurrent.atomic.AtomicInteger();

    private final Settings settings;
    private final PrintStream progress;

    public ServeBench(Settings settings, PrintStream progress) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.progress = Objects.requireNonNull(progress, "progress");
    }

    /** Runs every policy at every concurrency and returns the rows in that order. */
    public List<BenchRow> run() {
        if (settings.warmupRequests() > 0) {
            progress.printf("warm-up: %d requests on a kvflux stack (not reported)%n", settings.warmupRequests());
            runOne(Policy.KVFLUX, settings.warmupRequests(), settings.warmupRequests(), FaultPlan.NONE, false);
        }
        List<BenchRow> rows = new ArrayList<>();
        for (Policy policy : settings.policies()) {
            for (int i = 0; i < settings.concurrencies().size(); i++) {
                rows.add(runOne(policy, settings.concurrencies().get(i), settings.promptsAt(i), settings.faults(), true));
            }
        }
        return rows;
    }

    private BenchRow runOne(Policy policy, int concurrency, int prompts, FaultPlan faultPlan, boolean report) {
        List<Fault> faults = faultPlan.faults(prompts, settings.model().layers(), settings.seed());
        DescribedEngine engine;
        DescribedEngine decodeEngine;
        if (settings.backend().equals(SimulatedXgmiEngine.BACKEND)) {
            SimulatedXgmiEngine.Builder engineSettings = SimulatedXgmiEngine.builder()
                    .copyPath(settings.sgUnderLoad() ? CopyPath.SCATTER_GATHER : CopyPath.DEFAULT);
            faults.forEach(engineSettings::fault);
            engine = engineSettings.build();
            decodeEngine = SimulatedXgmiEngine.create();
        } else {
            engine = NativeTransferEngine.simulated("serve-bench-prefill-" + RUNS.incrementAndGet());
            decodeEngine = NativeTransferEngine.simulated("serve-bench-decode-" + RUNS.get());
        }
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10));
        String label = String.format(Locale.ROOT, "[%s c=%d]", report ? policy.wireName() : "warm-up", concurrency);
        try (engine; decodeEngine;
             DecodeServer decode = DecodeServer.builder().model(settings.model()).engine(decodeEngine)
                     .receiveDeadline(policy.decodeDeadline() ? settings.kvfluxDeadline() : null)
                     .auth(settings.notifyAuth()).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(settings.model()).policy(policy).engine(engine)
                     .transferTimeout(settings.transferTimeout()).notifyWithin(settings.kvfluxDeadline())
                     .auth(settings.notifyAuth()).bindNow();
             ProxyServer proxy = ProxyServer.builder().discoveryPort(0).registry(registry)
                     .registrationSecret(settings.notifyAuth()).bindNow()) {
            String url = "http://127.0.0.1:" + proxy.address().getPort();
            String discovery = "http://127.0.0.1:" + proxy.discoveryAddress().getPort();
            decode.pingProxy(discovery, Duration.ofSeconds(1));
            prefill.pingProxy(discovery, Duration.ofSeconds(1));
            awaitRegistration(registry);
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
            return new BenchRow(policy, concurrency, prompts, result, prefill.stats().failedWaitsInProgress(),
                    faults.size(), decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_FAILED),
                    decode.notifyMeters().count(NotifyEvent.DEADLINE_EXPIRED));
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
