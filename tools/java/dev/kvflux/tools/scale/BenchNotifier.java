package dev.kvflux.tools.scale;

import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

/**
 * Finishes its statuses in time order: it parks until the next is due, then finishes every status due by
 * then in one batch (as a backend hands out every completion queued since it last woke), so its cost per
 * status is the push's, not a wake-up's. Measures its own allocation, CPU and lateness.
 */
final class BenchNotifier implements Runnable {
    private final BenchStatus[] all;
    private final long[] schedule;
    private final long start;
    volatile long allocatedBytes;
    volatile long behindNanos;
    volatile long cpuNanos;

    BenchNotifier(BenchStatus[] all, long[] schedule, long start) {
        this.all = all;
        this.schedule = schedule;
        this.start = start;
    }

    @Override
    public void run() {
        com.sun.management.ThreadMXBean threads = ScaleBench.threadBean();
        long bytes0 = threads.getCurrentThreadAllocatedBytes();
        parkUntil(start);
        long cpu0 = threads.getCurrentThreadCpuTime();
        long late = 0;
        int i = 0;
        while (i < schedule.length) {
            parkUntil(start + (schedule[i] >>> 24));
            long now = System.nanoTime();
            while (i < schedule.length && start + (schedule[i] >>> 24) <= now) {
                long due = start + (schedule[i] >>> 24);
                all[(int) (schedule[i] & 0xFF_FFFF)].finish();
                late = System.nanoTime() - due;
                i++;
            }
        }
        cpuNanos = threads.getCurrentThreadCpuTime() - cpu0;
        behindNanos = Math.max(0, late);
        allocatedBytes = threads.getCurrentThreadAllocatedBytes() - bytes0;
    }

    /** The entries of {@code schedule} (time-ordered) whose request falls to notifier {@code i} of {@code k}. */
    static long[] part(long[] schedule, int per, int i, int k) {
        if (k == 1) {
            return schedule;
        }
        long[] mine = new long[schedule.length / k + per];
        int n = 0;
        for (long entry : schedule) {
            int request = (int) (entry & 0xFF_FFFF) / per;
            if (request % k == i) {
                if (n == mine.length) {
                    mine = Arrays.copyOf(mine, mine.length * 2);
                }
                mine[n++] = entry;
            }
        }
        return Arrays.copyOf(mine, n);
    }

    /**
     * Parks until {@code deadline}, never spinning: a spinning notifier would burn a core and count it as
     * the wait's. The timer's slack (tens of microseconds) makes statuses finish that much late in
     * batches, as a real notification thread woken by the OS would.
     */
    static void parkUntil(long deadline) {
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }
}
