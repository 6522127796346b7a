package dev.kvflux.tools.scale;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The bench's stand-in backend with no wait: its notifier threads finish a round's statuses at their times, as in
 * every row, and nothing queries or listens. Every row's {@code cores} includes this work whatever its wait, so a
 * row's cores less these are what its wait adds: the polling thread's sweeps, or for push the listener calls the
 * notifier makes on the wait's behalf.
 */
final class BackendAlone {
    private BackendAlone() {
    }

    /**
     * Process CPU over wall time, pooled over the settings' measured rounds after its warm-up rounds, for {@code n}
     * requests; the rounds are drawn as the rows' are.
     */
    static double cores(int n, ScaleBench.Settings settings) {
        SplittableRandom random = new SplittableRandom(settings.seed() + n);
        long cpu = 0;
        long wall = 0;
        for (int r = 0; r < settings.warmup() + settings.rounds(); r++) {
            long[] round = round(RoundPlan.draw(n, settings.statuses(), settings.spread().toNanos(), false, random),
                    settings);
            if (r >= settings.warmup()) {
                cpu += round[0];
                wall += round[1];
            }
        }
        return (double) cpu / Math.max(1, wall);
    }

    /**
     * One round of {@code plan}'s statuses: the process's CPU time and the wall time from the round's start to the
     * last status finished.
     */
    static long[] round(RoundPlan plan, ScaleBench.Settings settings) {
        long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20);
        int k = settings.notifiers();
        Thread[] threads = new Thread[k];
        for (int i = 0; i < k; i++) {
            BenchNotifier notifier = new BenchNotifier(plan.all(), BenchNotifier.part(plan.schedule(),
                    settings.statuses(), i, k), start, settings.notifierTick().toNanos());
            threads[i] = Thread.ofPlatform().name("bench-backend-" + i).daemon().start(notifier);
        }
        BenchNotifier.parkUntil(start);
        long cpu0 = ScaleBench.processCpuNanos();
        try {
            for (Thread thread : threads) {
                thread.join();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        long cpu1 = ScaleBench.processCpuNanos();
        long end = start;
        for (BenchStatus status : plan.all()) {
            end = Math.max(end, status.finishedAt());
        }
        return new long[] {cpu1 - cpu0, Math.max(1, end - start)};
    }
}
