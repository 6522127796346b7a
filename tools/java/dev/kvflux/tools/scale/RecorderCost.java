package dev.kvflux.tools.scale;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.operators.WaitRecorder;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongConsumer;

/**
 * The Micrometer recorder's CPU per wait, estimated without the machine's noise: one round counts the calls
 * each wait makes of each kind, then each kind is timed alone in a loop on one thread (the fastest of five
 * runs, on the thread's CPU clock). Added to it: what recording does inside the wait besides calling the
 * recorder, timed the same way: reading every status's completion time once at the end (over N requests'
 * statuses, as many as a round holds) and three clock reads (the scheduler's twice, the status's once).
 * Left out: counting polls and queries in the wait's fields (an addition per poll) and contention between
 * threads on the meters.
 */
final class RecorderCost {
    private static final int CALLS = 200_000;

    private RecorderCost() {
    }

    /** Calls per wait and the recorder's CPU per wait, in microseconds, and the nanoseconds per call of each kind. */
    record Estimate(double callsPerWait, double microsPerWait, String perCall, double inWaitMicros) {
    }

    /** Counts each kind of call, then forwards it. */
    private static final class Tally implements WaitRecorder {
        final LongAdder[] calls = new LongAdder[6];
        final WaitRecorder next;

        Tally(WaitRecorder next) {
            this.next = next;
            for (int i = 0; i < calls.length; i++) {
                calls[i] = new LongAdder();
            }
        }

        @Override
        public void recordWaitStarted(String strategy, int statuses) {
            calls[0].increment();
            next.recordWaitStarted(strategy, statuses);
        }

        @Override
        public void recordStatusesInFlight(String strategy, int change) {
            calls[1].increment();
            next.recordStatusesInFlight(strategy, change);
        }

        @Override
        public void recordStatusFailed(String strategy, StatusCode code) {
            calls[2].increment();
            next.recordStatusFailed(strategy, code);
        }

        @Override
        public void recordPolls(String strategy, int polls, long queries) {
            calls[3].increment();
            next.recordPolls(strategy, polls, queries);
        }

        @Override
        public void recordDetectionLag(String strategy, long lagNanos) {
            calls[4].increment();
            next.recordDetectionLag(strategy, lagNanos);
        }

        @Override
        public void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
            calls[5].increment();
            next.recordWaitEnded(strategy, outcome, durationNanos);
        }
    }

    /** Runs one round of {@code name} at {@code n} with a counting Micrometer recorder, then times each kind of call. */
    static Estimate estimate(String name, int n, ScaleBench.Settings settings) {
        Tally tally = new Tally(MicrometerWaitRecorder.of(new SimpleMeterRegistry()));
        ScaleBench.round(ScaleBench.strategy(name, settings).recorder(tally), ScaleBench.pushes(name), n, settings,
                new java.util.SplittableRandom(settings.seed()));
        MicrometerWaitRecorder alone = MicrometerWaitRecorder.of(new SimpleMeterRegistry());
        String s = "bench";
        LongConsumer[] kinds = {
            i -> alone.recordWaitStarted(s, 118),
            i -> alone.recordStatusesInFlight(s, (i & 1) == 0 ? 1 : -1),
            i -> alone.recordStatusFailed(s, StatusCode.ERR_RDMA_OP),
            i -> alone.recordPolls(s, 54, 3000),
            i -> alone.recordDetectionLag(s, 1000 + (i & 1023)),
            i -> alone.recordWaitEnded(s, WaitOutcome.DONE, 1_000_000 + (i & 1023)),
        };
        String[] names = {"started", "in flight", "failed", "polls", "lag", "ended"};
        double waits = tally.calls[0].sum();
        double calls = 0;
        double nanos = 0;
        StringBuilder perCall = new StringBuilder();
        for (int k = 0; k < kinds.length; k++) {
            double each = nanosPerCall(kinds[k]);
            long count = tally.calls[k].sum();
            calls += count;
            nanos += count * each;
            perCall.append(k == 0 ? "" : ", ").append(names[k]).append(' ')
                    .append(String.format(Locale.ROOT, "%.0f", each));
        }
        double inWait = scanNanosPerWait(n, settings.statuses()) + nanosPerCall(i -> CLOCK_SINK.add(
                reactor.core.scheduler.Schedulers.parallel().now(java.util.concurrent.TimeUnit.NANOSECONDS)
                        + reactor.core.scheduler.Schedulers.parallel().now(java.util.concurrent.TimeUnit.NANOSECONDS)
                        + System.nanoTime()));
        return new Estimate(calls / waits, nanos / waits / 1000 + inWait / 1000, perCall.toString(), inWait / 1000);
    }

    private static final LongAdder CLOCK_SINK = new LongAdder();

    /** The end-of-wait scan of every status's completion time, per request, over {@code n} requests' statuses. */
    private static double scanNanosPerWait(int n, int per) {
        BenchStatus[] all = new BenchStatus[n * per];
        for (int i = 0; i < all.length; i++) {
            all[i] = new BenchStatus(false);
            all[i].finish(System.nanoTime());
        }
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        double best = Double.MAX_VALUE;
        long sink = 0;
        for (int run = 0; run < 6; run++) {
            long cpu0 = threads.getCurrentThreadCpuTime();
            for (int req = 0; req < n; req++) {
                long latest = Long.MIN_VALUE;
                for (int j = req * per; j < (req + 1) * per; j++) {
                    long at = all[j].completedAtNanos();
                    if (at - latest > 0) {
                        latest = at;
                    }
                }
                sink += latest;
            }
            long cpu1 = threads.getCurrentThreadCpuTime();
            if (run > 0) {
                best = Math.min(best, (double) (cpu1 - cpu0) / n);
            }
        }
        CLOCK_SINK.add(sink);
        return best;
    }

    private static double nanosPerCall(LongConsumer call) {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        double best = Double.MAX_VALUE;
        for (int run = 0; run < 6; run++) {
            long cpu0 = threads.getCurrentThreadCpuTime();
            for (int i = 0; i < CALLS; i++) {
                call.accept(i);
            }
            long cpu1 = threads.getCurrentThreadCpuTime();
            if (run > 0) {
                best = Math.min(best, (double) (cpu1 - cpu0) / CALLS);
            }
        }
        return best;
    }
}
