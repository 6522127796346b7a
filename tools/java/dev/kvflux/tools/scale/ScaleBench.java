package dev.kvflux.tools.scale;

import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.Stats;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import reactor.core.Disposable;

/**
 * The scale bench: N concurrent requests of {@code statuses} statuses each, every status finishing at a
 * uniformly random time within {@code spread}, awaited by one wait strategy on its default scheduler.
 * Notifier threads ({@link Settings#notifiers()}, each owning whole requests) finish the statuses at their times
 * (and, for push, push them), as a backend's notification threads would. Figures are pooled over the measured rounds, after warm-up rounds.
 */
public final class ScaleBench {
    /**
     * The strategies the bench knows: those of {@link dev.kvflux.tools.repro.ReproStrategy} that need no
     * engine (vLLM's 1 ms sweep from one thread, the polling wait with an interval per request, on the shared
     * poll driver or adaptive, and the push wait), failing fast, then each with {@code -drain}.
     */
    public static final List<String> STRATEGIES = BenchWait.NAMES;

    /**
     * What the waits report to: {@code none} ({@link WaitRecorder#NOOP}) or {@code micrometer} (a
     * {@link MicrometerWaitRecorder} over a {@code SimpleMeterRegistry}).
     */
    public static final List<String> RECORDERS = List.of("none", "micrometer");

    /** The most statuses one round holds (they are all live at once). */
    public static final long MAX_STATUSES = 4_000_000;

    /** What to run. */
    public record Settings(List<Integer> ns, List<String> strategies, int statuses, Duration spread, int rounds,
                           int warmup, Duration slice, Duration transferTimeout, long seed, List<String> recorders,
                           int notifiers, Duration notifierTick) {
        public Settings {
            if (notifiers < 1 || notifiers > 64) {
                throw new IllegalArgumentException("--notifiers must lie between 1 and 64, got " + notifiers);
            }
            Objects.requireNonNull(notifierTick, "notifierTick");
            if (notifierTick.isNegative() || notifierTick.compareTo(Duration.ofMillis(10)) > 0) {
                throw new IllegalArgumentException("--notifier-tick must lie between 0 and 10ms, got "
                        + Durations.format(notifierTick));
            }
            ns = List.copyOf(ns);
            strategies = List.copyOf(strategies);
            recorders = List.copyOf(recorders);
            if (recorders.isEmpty() || recorders.stream().distinct().count() != recorders.size()
                    || !RECORDERS.containsAll(recorders)) {
                throw new IllegalArgumentException("--recorder takes none, micrometer or both (none,micrometer),"
                        + " each once; got " + String.join(",", recorders));
            }
            for (int n : ns) {
                if (n < 1 || n > 100_000) {
                    throw new IllegalArgumentException("--n values must lie between 1 and 100000, got " + n);
                }
            }
            strategies.forEach(BenchWait::named);
            if (statuses < 1 || statuses > 4096) {
                throw new IllegalArgumentException("--statuses must lie between 1 and 4096, got " + statuses);
            }
            for (int n : ns) {
                if ((long) n * statuses > MAX_STATUSES) {
                    throw new IllegalArgumentException("N x statuses must be at most " + MAX_STATUSES + " (memory),"
                            + " got " + n + " x " + statuses);
                }
            }
            if (rounds < 1 || rounds > 50 || warmup < 0 || warmup > 50) {
                throw new IllegalArgumentException("--rounds must lie between 1 and 50 and --warmup between 0 and 50,"
                        + " got " + rounds + " and " + warmup);
            }
            Objects.requireNonNull(spread, "spread");
            if (spread.isNegative() || spread.isZero() || spread.compareTo(Duration.ofMinutes(1)) > 0) {
                throw new IllegalArgumentException("--spread must be greater than zero and at most 1m, got " + spread);
            }
        }

        /** Settings whose notifiers wake at each status's time (no tick). */
        public Settings(List<Integer> ns, List<String> strategies, int statuses, Duration spread, int rounds,
                        int warmup, Duration slice, Duration transferTimeout, long seed, List<String> recorders,
                        int notifiers) {
            this(ns, strategies, statuses, spread, rounds, warmup, slice, transferTimeout, seed, recorders, notifiers,
                    Duration.ZERO);
        }

        /** Settings with {@link #defaultNotifiers()} notifier threads. */
        public Settings(List<Integer> ns, List<String> strategies, int statuses, Duration spread, int rounds,
                        int warmup, Duration slice, Duration transferTimeout, long seed, List<String> recorders) {
            this(ns, strategies, statuses, spread, rounds, warmup, slice, transferTimeout, seed, recorders,
                    defaultNotifiers());
        }

        /** Settings whose waits record nothing. */
        public Settings(List<Integer> ns, List<String> strategies, int statuses, Duration spread, int rounds,
                        int warmup, Duration slice, Duration transferTimeout, long seed) {
            this(ns, strategies, statuses, spread, rounds, warmup, slice, transferTimeout, seed, List.of("none"));
        }

        /** The experiment: 118 statuses within 1 s, 3 measured rounds after 1 warm-up, no recorder. */
        public static Settings defaults() {
            return new Settings(List.of(100, 1000, 10_000), List.of("reactive", "reactive-shared", "reactive-push"), 118,
                    Duration.ofSeconds(1), 3, 1, WaitSpec.DEFAULT_SLICE, Duration.ofSeconds(30), 42);
        }
    }

    private ScaleBench() {
    }

    /**
     * One notifier thread per eight cores, at least one: 4 on a 32-core host, 1 on 2 cores. A backend with many
     * streams completes from several threads (the GPU runtimes' callback threads, one per device or context), and
     * one thread cannot finish a million statuses a second, so a bench with one would measure its own notifier.
     */
    public static int defaultNotifiers() {
        return Math.max(1, Runtime.getRuntime().availableProcessors() / 8);
    }

    /** The wait named {@code name}, on its default scheduler. */
    static WaitStrategy strategy(String name, Settings settings) {
        return BenchWait.named(name).wait(settings);
    }

    static boolean pushes(String name) {
        return BenchWait.named(name).pushes();
    }

    /**
     * Runs every strategy at every N, one row per recorder; {@code progress} hears one line per strategy and
     * N as it starts (and, with the Micrometer recorder, the detection lag its meters saw).
     */
    public static List<ScaleRow> run(Settings settings, Consumer<String> progress) {
        List<ScaleRow> rows = new ArrayList<>();
        for (int n : settings.ns()) {
            progress.accept("the backend alone (no wait) at N = " + n + " ...");
            double backend = BackendAlone.cores(n, settings);
            for (String name : settings.strategies()) {
                progress.accept(name + " at N = " + n + (settings.recorders().size() > 1
                        ? ", recorders " + String.join(" and ", settings.recorders()) + " alternating" : "") + " ...");
                rows.addAll(measure(name, n, settings, backend, progress));
            }
        }
        return rows;
    }

    /**
     * The rows of one strategy at one N, one per recorder. With several recorders their rounds alternate
     * (the order flips every round), so that the machine's drift and noise fall on all of them alike and
     * each measured round of one has a neighbour of the other to be compared with.
     */
    static List<ScaleRow> measure(String name, int n, Settings settings, double backendCores,
                                  Consumer<String> progress) {
        boolean push = pushes(name);
        List<String> recorders = settings.recorders();
        List<WaitStrategy> waits = new ArrayList<>();
        List<SimpleMeterRegistry> registries = new ArrayList<>();
        for (String recorder : recorders) {
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            registries.add(registry);
            WaitRecorder chosen = recorder.equals("micrometer") ? MicrometerWaitRecorder.of(registry) : WaitRecorder.NOOP;
            waits.add(strategy(name, settings).recorder(chosen));
        }
        List<List<Round>> measured = new ArrayList<>();
        recorders.forEach(r -> measured.add(new ArrayList<>()));
        SplittableRandom random = new SplittableRandom(settings.seed() + n);
        for (int r = 0; r < settings.warmup() + settings.rounds(); r++) {
            for (int k = 0; k < recorders.size(); k++) {
                int which = r % 2 == 0 ? k : recorders.size() - 1 - k;
                Round round = round(waits.get(which), push, n, settings, random);
                if (r >= settings.warmup()) {
                    measured.get(which).add(round);
                }
            }
        }
        List<ScaleRow> rows = new ArrayList<>();
        for (int k = 0; k < recorders.size(); k++) {
            double bytesPerTick = push ? Double.NaN : steadyStateBytesPerQuery(waits.get(k), n, settings.statuses());
            rows.add(row(name, recorders.get(k), n, settings, measured.get(k), bytesPerTick, backendCores));
            Timer lag = registries.get(k).find(MicrometerWaitRecorder.DETECTION_LAG).timer();
            if (lag != null) {
                progress.accept(String.format(java.util.Locale.ROOT,
                        "  %s: %s over %,d waits (warm-up included): mean %.2f ms, max %.2f ms",
                        recorders.get(k), MicrometerWaitRecorder.DETECTION_LAG, lag.count(),
                        lag.mean(TimeUnit.MILLISECONDS), lag.max(TimeUnit.MILLISECONDS)));
            }
        }
        int none = recorders.indexOf("none");
        if (none >= 0 && recorders.contains("micrometer")) {
            double waitMicros = rows.get(none).roundCpuMillis().stream().mapToDouble(Double::doubleValue).average()
                    .orElse(Double.NaN) * 1000 / n;
            RecorderCost.Estimate cost = RecorderCost.estimate(name, n, settings);
            progress.accept(String.format(java.util.Locale.ROOT, "  recorder cost estimate: %.1f calls per wait,"
                            + " %.2f us of recording CPU per wait (ns per call: %s; in the wait: %.2f us); wait CPU"
                            + " without a recorder %.1f us per wait; ratio %.2f%%", cost.callsPerWait(),
                    cost.microsPerWait(), cost.perCall(), cost.inWaitMicros(), waitMicros,
                    100 * cost.microsPerWait() / waitMicros));
        }
        return rows;
    }

    private static ScaleRow row(String name, String recorder, int n, Settings settings, List<Round> measured,
                                double bytesPerTick, double backendCores) {
        double[] lags = measured.stream().flatMapToDouble(r -> Arrays.stream(r.lagsMs)).sorted().toArray();
        double[] notifierLags = measured.stream().flatMapToDouble(r -> Arrays.stream(r.notifierLagsMs)).sorted().toArray();
        long cpu = 0;
        long wall = 0;
        long queries = 0;
        long gcCount = 0;
        long gcMillis = 0;
        long errors = 0;
        long unfinished = 0;
        long notifierBytes = 0;
        long notifierCpu = 0;
        double behind = 0;
        for (Round r : measured) {
            cpu += r.cpuNanos;
            wall += r.wallNanos;
            queries += r.queries;
            gcCount += r.gcCount;
            gcMillis += r.gcMillis;
            errors += r.errors;
            unfinished += r.unfinished;
            notifierBytes += r.notifierBytes;
            notifierCpu += r.notifierCpuNanos;
            behind = Math.max(behind, r.notifierBehindMs);
        }
        boolean push = pushes(name);
        long statuses = (long) n * settings.statuses() * measured.size();
        return new ScaleRow(name, recorder, n, settings.statuses(), measured.size(), (double) cpu / wall,
                Stats.nearestRank(lags, 0.50), Stats.nearestRank(lags, 0.99), Stats.max(lags),
                (double) queries / statuses, gcCount, gcMillis, errors, unfinished,
                push ? (double) notifierBytes / statuses : Double.NaN, bytesPerTick, behind,
                (double) notifierCpu / wall, measured.stream().map(r -> r.waitCpuNanos / 1e6).toList(),
                measured.stream().map(r -> r.wakeups).toList(), Stats.nearestRank(notifierLags, 0.99),
                settings.notifiers(), backendCores);
    }

    record Round(double[] lagsMs, double[] notifierLagsMs, long cpuNanos, long wallNanos, long queries, long gcCount,
                         long gcMillis,
                         long errors, long unfinished, long notifierBytes, double notifierBehindMs,
                         long notifierCpuNanos, long waitCpuNanos, long wakeups) {
    }

    /**
     * One wave: subscribe every wait, then finish every status at its time and wait for the last signal.
     * The N subscriptions are paced evenly over one slice, as requests arriving at independent times would
     * be, so each polling wait's ticks fall at its own phase of the slice. Subscribed back to back instead,
     * the waits' ticks bunch into the few milliseconds the loop took, a scheduler thread runs several per
     * wake-up, and the round's CPU follows the loop's speed: at N = 1,000 on 32 cores a loop of 3 ms gave
     * about half the wake-ups (and 60% of the CPU) of one of 5 ms, so whatever slowed the loop in one round
     * (a JIT pause, a neighbour, a recorder's calls at subscription) weighed far more than its own cost.
     * Past one subscription per few microseconds (N beyond a few thousand at a 10 ms slice) the pacing
     * cannot keep up and subscriptions run back to back.
     */
    static Round round(WaitStrategy wait, boolean push, int n, Settings settings, SplittableRandom random) {
        int per = settings.statuses();
        long spread = settings.spread().toNanos();
        RoundPlan plan = RoundPlan.draw(n, per, spread, push, random);
        BenchStatus[] all = plan.all();
        long[] schedule = plan.schedule();
        long[] lastOffset = plan.lastOffset();
        long[] doneAt = new long[n];
        AtomicLong errors = new AtomicLong();
        CountDownLatch finished = new CountDownLatch(n);
        Disposable[] subscriptions = new Disposable[n];
        long paced = System.nanoTime();
        long gap = settings.slice().toNanos() / n;
        for (int req = 0; req < n; req++) {
            int r = req;
            spinUntil(paced + req * gap);
            List<BenchStatus> statuses = Arrays.asList(Arrays.copyOfRange(all, req * per, (req + 1) * per));
            subscriptions[req] = wait.await(statuses).subscribe(null, e -> {
                doneAt[r] = System.nanoTime();
                errors.incrementAndGet();
                finished.countDown();
            }, () -> {
                doneAt[r] = System.nanoTime();
                finished.countDown();
            });
        }
        long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20);
        int k = settings.notifiers();
        BenchNotifier[] notifiers = new BenchNotifier[k];
        Thread[] threads = new Thread[k];
        for (int i = 0; i < k; i++) {
            notifiers[i] = new BenchNotifier(all, BenchNotifier.part(schedule, per, i, k), start,
                    settings.notifierTick().toNanos());
            threads[i] = Thread.ofPlatform().name("bench-notifier-" + i).daemon().start(notifiers[i]);
        }
        BenchNotifier.parkUntil(start);
        long wakeups0 = voluntaryContextSwitches();
        long cpu0 = processCpuNanos();
        java.util.Map<Long, Long> threadCpu0 = threadCpuNanos();
        long[] gc0 = gc();
        try {
            finished.await(settings.transferTimeout().toNanos() + spread + TimeUnit.SECONDS.toNanos(10),
                    TimeUnit.NANOSECONDS);
            for (Thread thread : threads) {
                thread.join();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long cpu1 = processCpuNanos();
        long wakeups1 = voluntaryContextSwitches();
        java.util.Set<Long> notifierIds = new java.util.HashSet<>();
        for (Thread thread : threads) {
            notifierIds.add(thread.threadId());
        }
        long othersCpu = cpuSince(threadCpu0, notifierIds);
        long[] gc1 = gc();
        long end = start;
        double[] lags = new double[n];
        double[] notifierLags = new double[n];
        int counted = 0;
        for (int req = 0; req < n; req++) {
            if (doneAt[req] != 0) {
                end = Math.max(end, doneAt[req]);
                long due = start + lastOffset[req];
                long finishedLast = Long.MIN_VALUE;
                for (int j = 0; j < per; j++) {
                    finishedLast = Math.max(finishedLast, all[req * per + j].finishedAt());
                }
                notifierLags[counted] = Math.max(0, finishedLast - due) / 1e6;
                lags[counted++] = (doneAt[req] - due) / 1e6;
            } else {
                subscriptions[req].dispose();
            }
        }
        long queries = 0;
        for (BenchStatus status : all) {
            queries += status.queries;
        }
        long notifierBytes = 0;
        long notifierCpu = 0;
        long behind = 0;
        for (BenchNotifier notifier : notifiers) {
            notifierBytes += notifier.allocatedBytes;
            notifierCpu += notifier.cpuNanos;
            behind = Math.max(behind, notifier.behindNanos);
        }
        return new Round(Arrays.copyOf(lags, counted), Arrays.copyOf(notifierLags, counted), cpu1 - cpu0,
                Math.max(1, end - start), queries, gc1[0] - gc0[0], gc1[1] - gc0[1], errors.get(), finished.getCount(),
                notifierBytes, behind / 1e6, notifierCpu, othersCpu + (push ? notifierCpu : 0),
                wakeups0 < 0 || wakeups1 < 0 ? -1 : wakeups1 - wakeups0);
    }

    /**
     * Bytes allocated by the whole process per status query while {@code n} waits poll statuses that
     * stay in flight: the steady-state cost of a tick, subscription excluded (measured after 300 ms).
     */
    private static double steadyStateBytesPerQuery(WaitStrategy wait, int n, int per) {
        BenchStatus[] all = new BenchStatus[n * per];
        Disposable[] subscriptions = new Disposable[n];
        for (int req = 0; req < n; req++) {
            BenchStatus[] mine = new BenchStatus[per];
            for (int j = 0; j < per; j++) {
                mine[j] = new BenchStatus(false);
                all[req * per + j] = mine[j];
            }
            subscriptions[req] = wait.await(Arrays.asList(mine)).subscribe(null, e -> { });
        }
        com.sun.management.ThreadMXBean threads = threadBean();
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(300));
        long bytes0 = threads.getTotalThreadAllocatedBytes();
        long queries0 = totalQueries(all);
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(500));
        long bytes1 = threads.getTotalThreadAllocatedBytes();
        long queries1 = totalQueries(all);
        for (Disposable d : subscriptions) {
            d.dispose();
        }
        return queries1 == queries0 ? Double.NaN : (double) (bytes1 - bytes0) / (queries1 - queries0);
    }

    private static long totalQueries(BenchStatus[] all) {
        long sum = 0;
        for (BenchStatus status : all) {
            sum += status.queries;
        }
        return sum;
    }

    /**
     * Spins until {@code deadline}: pacing the subscriptions a few microseconds apart needs a finer clock
     * than {@link LockSupport#parkNanos}'s (tens of microseconds of slack). Runs before the measured window.
     */
    private static void spinUntil(long deadline) {
        while (deadline - System.nanoTime() > 0) {
            Thread.onSpinWait();
        }
    }

    /**
     * The voluntary context switches of every thread of this process so far (Linux {@code /proc}), or -1
     * where they cannot be read. A polling wait's scheduler thread switches once each time it sleeps until
     * its next task, so this counts its wake-ups, which are most of its CPU at scale.
     */
    static long voluntaryContextSwitches() {
        java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
        if (tasks == null) {
            return -1;
        }
        long sum = 0;
        for (java.io.File task : tasks) {
            try {
                for (String line : java.nio.file.Files.readAllLines(new java.io.File(task, "status").toPath())) {
                    if (line.startsWith("voluntary_ctxt_switches:")) {
                        sum += Long.parseLong(line.substring("voluntary_ctxt_switches:".length()).trim());
                    }
                }
            } catch (java.io.IOException | RuntimeException gone) {
                // the thread ended between the listing and the read: its switches are no longer counted
            }
        }
        return sum;
    }

    static com.sun.management.ThreadMXBean threadBean() {
        return (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    }

    /** The CPU time of every live thread, by id, in nanoseconds (the process's CPU clock ticks in 10 ms steps). */
    private static java.util.Map<Long, Long> threadCpuNanos() {
        com.sun.management.ThreadMXBean threads = threadBean();
        long[] ids = threads.getAllThreadIds();
        long[] cpu = threads.getThreadCpuTime(ids);
        java.util.Map<Long, Long> byId = new java.util.HashMap<>();
        for (int i = 0; i < ids.length; i++) {
            if (cpu[i] >= 0) {
                byId.put(ids[i], cpu[i]);
            }
        }
        return byId;
    }

    /** CPU time the threads alive at {@code before} and now have used since, threads {@code excluded} left out. */
    private static long cpuSince(java.util.Map<Long, Long> before, java.util.Set<Long> excluded) {
        long sum = 0;
        for (java.util.Map.Entry<Long, Long> now : threadCpuNanos().entrySet()) {
            Long then = before.get(now.getKey());
            if (then != null && !excluded.contains(now.getKey())) {
                sum += now.getValue() - then;
            }
        }
        return sum;
    }

    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** Collections and milliseconds spent collecting, over every collector. */
    private static long[] gc() {
        long count = 0;
        long millis = 0;
        for (GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans()) {
            count += Math.max(0, bean.getCollectionCount());
            millis += Math.max(0, bean.getCollectionTime());
        }
        return new long[] {count, millis};
    }
}
