package dev.kvflux.tools.scale;

import java.util.Arrays;
import java.util.concurrent.locks.LockSupport;

/**
 * Finishes its statuses in time order: it parks until the next is due, then finishes every status due by
 * then in one batch (as a backend hands out every completion queued since it last woke), so its cost per
 * status is the push's, not a wake-up's. With a tick it wakes at most once per tick, as a backend that hands
 * out completions on a timer or after each wait for an event does: fewer wake-ups, each status up to a tick
 * later. Measures its own allocation, CPU and lateness.
 */
final class BenchNotifier implements Runnable {
    /** Statuses finished between two readings of the clock within one batch. */
    private static final int CLOCK_EVERY = 16;
    private final BenchStatus[] all;
    private final long[] schedule;
    private final long start;
    private final long tickNanos;
    volatile long allocatedBytes;
    volatile long behindNanos;
    volatile long cpuNanos;
    private volatile int wakes;

    BenchNotifier(BenchStatus[] all, long[] schedule, long start, long tickNanos) {
        this.all = all;
        this.schedule = schedule;
        this.start = start;
        this.tickNanos = tickNanos;
    }

    @Override
    public void run() {
        com.sun.management.ThreadMXBean threads = ScaleBench.threadBean();
        long bytes0 = threads.getCurrentThreadAllocatedBytes();
        parkUntil(start);
        long cpu0 = threads.getCurrentThreadCpuTime();
        long late = 0;
        long woke = start - tickNanos;
        int i = 0;
        int woken = 0;
        while (i < schedule.length) {
            parkUntil(Math.max(dueAt(i), woke + tickNanos));
            woke = System.nanoTime();
            woken++;
            long now = woke;
            long due = 0;
            // every status due when it woke; the clock is read again every few, so that a long batch's
            // last statuses are not stamped with its first one's time
            for (int inBatch = 0; i < schedule.length && dueAt(i) <= woke; inBatch++, i++) {
                if (inBatch > 0 && inBatch % CLOCK_EVERY == 0) {
                    now = System.nanoTime();
                }
                due = dueAt(i);
                all[(int) (schedule[i] & 0xFF_FFFF)].finish(now);
            }
            late = now - due;
        }
        cpuNanos = threads.getCurrentThreadCpuTime() - cpu0;
        wakes = woken;
        behindNanos = Math.max(0, late);
        allocatedBytes = threads.getCurrentThreadAllocatedBytes() - bytes0;
    }

    /** When entry {@code i} of the schedule is due ({@link System#nanoTime()}): its offset after the start. */
    private long dueAt(int i) {
        return start + (schedule[i] >>> 24);
    }

    /** How many times it woke to finish statuses; read once it has run. */
    int wakes() {
        return wakes;
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
