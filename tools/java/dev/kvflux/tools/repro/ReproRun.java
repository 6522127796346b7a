package dev.kvflux.tools.repro;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.Polls;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.Stats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/**
 * vLLM's MoRI-IO measurement: for each strategy, {@code requests} times, post one request's layers (one
 * batch per layer, after each layer's event) and time the strategy's wait over their statuses, in real
 * time, from the end of posting to the wait's end, as vLLM's reproducer does.
 */
public final class ReproRun {

    /**
     * One strategy, how many waits to time with it, and how many untimed requests to send with it first
     * ({@code warmUp}): enough of them let the JIT compile the strategy's own path before anything is timed.
     */
    public record Plan(String strategy, int requests, int warmUp) {
        public Plan {
            ReproStrategy.named(strategy);
            if (requests < 1) {
                throw new IllegalArgumentException("requests must be at least 1, got " + requests);
            }
            if (warmUp < 0) {
                throw new IllegalArgumentException("warm-up requests must be 0 or more, got " + warmUp);
            }
        }

        /** {@code requests} timed waits with no untimed request first. */
        public Plan(String strategy, int requests) {
            this(strategy, requests, 0);
        }
    }

    /**
     * One timed wait: seconds, statuses succeeded at its end, its error if it failed, the target's extras, its
     * detection lag in milliseconds (the wait's end minus the last copy's end; NaN when the backend cannot tell
     * when copies end, or the wait failed), and, for a wait that ended on a push, that lag stage by stage
     * ({@link PushStages}; empty otherwise).
     */
    public record Wait(double seconds, int succeeded, int total, String error, Map<String, Object> extras,
                       double lagMs, Map<String, Double> stages) {
        public Wait(double seconds, int succeeded, int total, String error, Map<String, Object> extras) {
            this(seconds, succeeded, total, error, extras, Double.NaN, Map.of());
        }

        public boolean failed() {
            return error != null;
        }

        public boolean hasLag() {
            return !Double.isNaN(lagMs);
        }
    }

    /** Every timed wait of one strategy, and how many untimed requests went before them. */
    public record StrategyResult(String strategy, List<Wait> waits, int warmUp) {
        /** {@code waits} with no untimed request before them. */
        public StrategyResult(String strategy, List<Wait> waits) {
            this(strategy, waits, 0);
        }

        public double median() {
            return Stats.median(seconds());
        }

        public double min() {
            return Stats.min(seconds());
        }

        public double max() {
            return Stats.max(seconds());
        }

        public int statusesSucceeded() {
            return waits.stream().mapToInt(Wait::succeeded).sum();
        }

        public int statusesTotal() {
            return waits.stream().mapToInt(Wait::total).sum();
        }

        public long failedWaits() {
            return waits.stream().filter(Wait::failed).count();
        }

        /** Whether any wait knows its detection lag. */
        public boolean hasLag() {
            return waits.stream().anyMatch(Wait::hasLag);
        }

        /** The median detection lag in ms over the waits that know it; NaN if none does. */
        public double lagP50Ms() {
            double[] lags = lags();
            return lags.length == 0 ? Double.NaN : Stats.median(lags);
        }

        /** The 99th-percentile detection lag in ms (nearest rank); NaN if no wait knows it. */
        public double lagP99Ms() {
            double[] lags = lags();
            return lags.length == 0 ? Double.NaN : Stats.nearestRank(Stats.sorted(lags), 0.99);
        }

        /** The largest detection lag in ms; NaN if no wait knows it. */
        public double lagMaxMs() {
            double[] lags = lags();
            return lags.length == 0 ? Double.NaN : Stats.max(lags);
        }

        private double[] lags() {
            return waits.stream().filter(Wait::hasLag).mapToDouble(Wait::lagMs).toArray();
        }

        /**
         * Each push stage that some wait passed, in order, with the p50, p99 (nearest rank) and largest of its
         * milliseconds over those waits, and how many waits passed it.
         */
        public Map<String, double[]> stages() {
            Map<String, List<Double>> byStage = new LinkedHashMap<>();
            for (String stage : PushStages.NAMES) {
                for (Wait w : waits) {
                    Double ms = w.stages().get(stage);
                    if (ms != null) {
                        byStage.computeIfAbsent(stage, k -> new ArrayList<>()).add(ms);
                    }
                }
            }
            Map<String, double[]> out = new LinkedHashMap<>();
            byStage.forEach((stage, values) -> {
                double[] sorted = Stats.sorted(values.stream().mapToDouble(Double::doubleValue).toArray());
                out.put(stage, new double[] {Stats.median(sorted), Stats.nearestRank(sorted, 0.99),
                        sorted[sorted.length - 1], sorted.length});
            });
            return out;
        }

        private double[] seconds() {
            return waits.stream().mapToDouble(Wait::seconds).toArray();
        }
    }

    /** The whole run, with the target's {@linkplain ReproTarget#setup() setup}. */
    public record Result(String backend, ReproGeometry geometry, ReproSettings settings,
                         List<StrategyResult> strategies, Map<String, Object> setup) {
    }

    /** Told about each wait while the run goes on; called on the running thread or a timer thread. */
    public interface Progress {
        /** About every second while a wait runs. */
        default void waiting(String strategy, int request, int requests, Duration elapsed) {
        }

        /** When a wait ended. */
        default void waited(String strategy, int request, int requests, Wait wait) {
        }
    }

    private ReproRun() {
    }

    /**
     * Runs the target's warm-up requests, then every plan (its untimed requests, then its timed ones), on one target
     * of {@code backend}, one wait at a time; blocks the calling thread (never call it on a non-blocking Reactor
     * thread).
     *
     * @throws IllegalStateException if a warm-up request failed, or a layer's event was never ready
     */
    public static Result run(ReproBackend backend, ReproGeometry geometry, ReproSettings settings, List<Plan> plans,
                             Progress progress) {
        Objects.requireNonNull(progress, "progress");
        List<StrategyResult> results = new ArrayList<>();
        Map<String, Object> setup;
        try (ReproTarget target = backend.open(geometry, settings)) {
            setup = Collections.unmodifiableMap(new LinkedHashMap<>(target.setup()));
            for (ReproStrategy strategy : target.warmUp()) {
                String label = "warm-up " + strategy.label();
                Wait wait = timeOne(target, geometry, settings, start(target, strategy, settings), label, 0, 1,
                        progress);
                progress.waited(label, 0, 1, wait);
                checkWarmUp(strategy, wait);
            }
            for (Plan plan : plans) {
                WaitStrategy strategy = start(target, ReproStrategy.named(plan.strategy()), settings);
                if (plan.warmUp() > 0) {
                    String warmUpLabel = "warm-up " + plan.strategy();
                    target.warmingUp(true);
                    for (int r = 0; r < plan.warmUp(); r++) {
                        Wait wait = timeOne(target, geometry, settings, strategy, warmUpLabel, r, plan.warmUp(),
                                progress);
                        progress.waited(warmUpLabel, r, plan.warmUp(), wait);
                        checkWarmUp(ReproStrategy.named(plan.strategy()), wait);
                    }
                    target.warmingUp(false);
                }
                List<Wait> waits = new ArrayList<>();
                for (int r = 0; r < plan.requests(); r++) {
                    Wait wait = timeOne(target, geometry, settings, strategy, plan.strategy(), r, plan.requests(),
                            progress);
                    waits.add(wait);
                    progress.waited(plan.strategy(), r, plan.requests(), wait);
                }
                results.add(new StrategyResult(plan.strategy(), List.copyOf(waits), plan.warmUp()));
            }
        }
        return new Result(backend.name(), geometry, settings, List.copyOf(results), setup);
    }

    /** How many bytes decode found wrong in {@code wait}, as its target reported them; 0 if it reports none. */
    public static long mismatchedBytes(Wait wait) {
        return wait.extras().get(ReproTarget.MISMATCHED_BYTES) instanceof Number n ? n.longValue() : 0;
    }

    /** A copy path or a pair of GPUs that does not work fails here, in seconds, rather than wait after wait. */
    private static void checkWarmUp(ReproStrategy strategy, Wait wait) {
        if (wait.failed() || wait.succeeded() != wait.total() || mismatchedBytes(wait) != 0) {
            throw new IllegalStateException("the " + strategy.label() + " warm-up request failed (" + wait.succeeded()
                    + " of " + wait.total() + " statuses succeeded, " + mismatchedBytes(wait) + " mismatched bytes"
                    + (wait.failed() ? ", " + wait.error() : "") + "); not timing anything");
        }
    }

    /** Tells {@code target} that {@code strategy}'s requests come, and returns its wait on the target's engine. */
    private static WaitStrategy start(ReproTarget target, ReproStrategy strategy, ReproSettings settings) {
        target.startStrategy(strategy);
        return strategy.wait(target.engine(), settings.transferTimeout(), settings.slice());
    }

    private static Wait timeOne(ReproTarget target, ReproGeometry geometry, ReproSettings settings,
                                WaitStrategy wait, String label, int request, int requests, Progress progress) {
        TransferSession session = target.session();
        List<TransferStatus> statuses = new ArrayList<>(geometry.layers());
        WaitThreads threads = WaitThreads.find(); // enumerating threads costs: done before posting, outside the timing
        // Everything the timing needs is set up before the posts: where the last copies end within the last post (a
        // small batch on a GPU), work done between that post and the wait's subscription would count as the wait's lag.
        QueryCount count = new QueryCount();
        WaitStrategy counted = wait.recorder(count);
        long[] cpuAtStart = threads.cpuNanos(); // the push threads' work while the batches are posted counts too
        long[] waitStart = {System.nanoTime()};
        Disposable ticker = Flux.interval(Duration.ofSeconds(1)).subscribe(tick -> progress.waiting(
                label, request, requests, Duration.ofNanos(System.nanoTime() - waitStart[0])));
        Duration eventTimeout = settings.transferTimeout();
        boolean posted = false;
        try {
            for (int layer = 0; layer < geometry.layers(); layer++) {
                int l = layer;
                Polls.layerReady(target.layerEvent(request, layer), Polls.DEFAULT_EVENT_POLL, eventTimeout, null)
                        .onErrorMap(e -> e.getCause() instanceof TimeoutException,
                                e -> new IllegalStateException("layer " + l + "'s event of "
                                + label + " request " + request + " was not ready after "
                                + Durations.format(eventTimeout) + " (the transfer timeout); the target's layer events"
                                + " must turn ready"))
                        .block();
                statuses.add(session.batchWrite(geometry.plan(layer), session.allocateTransferUid()));
            }
            posted = true;
        } finally {
            if (!posted) {
                ticker.dispose();
            }
        }
        long start = System.nanoTime();
        waitStart[0] = start;
        String error = null;
        try {
            counted.await(statuses).block();
        } catch (RuntimeException e) {
            error = e.getMessage();
        } finally {
            ticker.dispose();
        }
        long end = System.nanoTime();
        long endOnStatusClock = statuses.getFirst().clockNanos();
        boolean atSubscription = error == null && count.endedOnCaller && counted.strategyName().startsWith(
                dev.kvflux.operators.WaitStrategy.REACTIVE_PUSH);
        dev.kvflux.bindings.PushTimeline lastPush = error != null || atSubscription ? null : PushStages.last(statuses);
        long cpu = threads.cpuSince(cpuAtStart); // after both ends: it enumerates threads
        double seconds = (end - start) / 1e9;
        int succeeded = (int) statuses.stream().filter(s -> s.code() == StatusCode.SUCCESS).count();
        double statusLag = error != null ? Double.NaN // before afterWait, which may release the statuses
                : lagMs(statuses, endOnStatusClock, System.nanoTime() + target.copyEndGrace().toNanos());
        Map<String, Object> figures = new LinkedHashMap<>(target.afterWait(request, end));
        Map<String, Double> stages = atSubscription
                ? PushStages.atSubscription(target.lastCopyEndNanos(), start, count.startedAt, count.endedAt, end)
                : PushStages.of(lastPush, target.lastCopyEndNanos(), start, count.endedAt, end);
        if (count.queries >= 0) {
            figures.putIfAbsent(QUERIES_PER_STATUS, (double) count.queries / statuses.size());
        }
        if (cpu >= 0) {
            figures.putIfAbsent(WAIT_CPU_MS, cpu / 1e6);
        }
        Map<String, Object> extras = Collections.unmodifiableMap(figures);
        double lag = error != null ? Double.NaN
                : extras.get(ReproTarget.DETECTION_LAG_MS) instanceof Number n ? n.doubleValue() : statusLag;
        return new Wait(seconds, succeeded, statuses.size(), error, extras, lag, stages);
    }

    /** Each wait's status queries (kvflux's strategies count theirs), per status: what polling costs a request. */
    public static final String QUERIES_PER_STATUS = "queries_per_status";
    /**
     * CPU time, in ms, that the JVM threads which run waits spent from the request's first post to the wait's end
     * (a push wait's thread works while the layers are still being posted): Reactor's parallel and
     * bounded-elastic workers and kvflux's own threads (a notification thread of pushes). Threads of a native
     * library (a simulator's copy and timer threads, the real MoRI shim's notifier) are not counted.
     */
    public static final String WAIT_CPU_MS = "wait_cpu_ms";

    /**
     * Counts the status queries a wait reports at its end (-1 when the strategy reports none), and notes when the
     * wait reported its end: on its own thread, before its subscriber is signalled.
     */
    private static final class QueryCount implements dev.kvflux.operators.WaitRecorder {
        volatile long queries = -1;
        volatile long endedAt = TransferStatus.UNKNOWN_TIME;
        /** When the wait reported its start: it was subscribed to and begins its work on the statuses. */
        volatile long startedAt = TransferStatus.UNKNOWN_TIME;
        /** Whether the wait ended on the thread that made this count, the one that subscribes to the wait. */
        volatile boolean endedOnCaller;
        private final Thread caller = Thread.currentThread();

        @Override
        public void recordPolls(String strategy, int polls, long queried) {
            queries = queried;
        }

        @Override
        public void recordWaitStarted(String strategy, int statuses) {
            startedAt = System.nanoTime();
        }

        @Override
        public void recordWaitEnded(String strategy, dev.kvflux.operators.WaitOutcome outcome, long durationNanos) {
            endedAt = System.nanoTime();
            endedOnCaller = Thread.currentThread() == caller;
        }
    }

    /**
     * The threads {@link #WAIT_CPU_MS} counts. Found before a request is posted; around the wait only their CPU
     * clocks are read (tens of microseconds), and threads that started during the wait count whole.
     */
    private record WaitThreads(long[] ids) {
        private static final java.lang.management.ThreadMXBean BEAN =
                java.lang.management.ManagementFactory.getThreadMXBean();

        static WaitThreads find() {
            if (!BEAN.isThreadCpuTimeSupported() || !BEAN.isThreadCpuTimeEnabled()) {
                return new WaitThreads(null);
            }
            return new WaitThreads(java.util.Arrays.stream(BEAN.getThreadInfo(BEAN.getAllThreadIds()))
                    .filter(info -> info != null && waits(info.getThreadName()))
                    .mapToLong(java.lang.management.ThreadInfo::getThreadId).toArray());
        }

        /** Each thread's CPU time now, in ns (-1 for one that ended); null where the JVM does not measure it. */
        long[] cpuNanos() {
            if (ids == null) {
                return null;
            }
            long[] cpu = new long[ids.length];
            for (int i = 0; i < ids.length; i++) {
                cpu[i] = BEAN.getThreadCpuTime(ids[i]);
            }
            return cpu;
        }

        /** The CPU these threads, and those that started since, used since {@code before}; -1 if not measured. */
        long cpuSince(long[] before) {
            if (before == null) {
                return -1;
            }
            long total = 0;
            java.util.Set<Long> known = new java.util.HashSet<>();
            for (int i = 0; i < ids.length; i++) {
                known.add(ids[i]);
                long now = BEAN.getThreadCpuTime(ids[i]);
                if (now >= 0 && before[i] >= 0) {
                    total += now - before[i];
                }
            }
            for (long id : find().ids()) {
                if (!known.contains(id)) {
                    total += Math.max(0, BEAN.getThreadCpuTime(id));
                }
            }
            return total;
        }
    }

    private static boolean waits(String thread) {
        return thread.startsWith("parallel-") || thread.startsWith("boundedElastic-") || thread.startsWith("kvflux-");
    }

    /**
     * The wait's end minus the last copy's end, in ms, from the statuses' copy-end times when every status knows
     * its own (waiting until {@code graceUntilNanos} for those not known yet); NaN otherwise. A target's own measure ({@link ReproTarget#DETECTION_LAG_MS}, from GPU timing
     * events) takes precedence over this.
     */
    static double lagMs(List<TransferStatus> statuses, long endOnStatusClock, long graceUntilNanos) {
        long last = Long.MIN_VALUE;
        for (TransferStatus status : statuses) {
            long at = status.completedAtNanos();
            while (at == TransferStatus.UNKNOWN_TIME && System.nanoTime() - graceUntilNanos < 0) {
                java.util.concurrent.locks.LockSupport.parkNanos(100_000);
                at = status.completedAtNanos();
            }
            if (at == TransferStatus.UNKNOWN_TIME) {
                return Double.NaN;
            }
            last = Math.max(last, at);
        }
        return Math.max(0, endOnStatusClock - last) / 1e6;
    }
}
