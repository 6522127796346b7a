package dev.kvflux.tools.scale;

import java.util.SplittableRandom;

/**
 * One round's statuses and when each finishes: {@code n} requests of {@code per} statuses, each due at a uniformly
 * random offset within the spread.
 *
 * @param all the statuses, request by request
 * @param schedule each status's offset (nanoseconds, shifted left 24 bits) and index in {@code all}, in time order
 * @param lastOffset per request, the offset of its last status to finish
 */
record RoundPlan(BenchStatus[] all, long[] schedule, long[] lastOffset) {

    /** A plan drawn from {@code random}; {@code push}: whether the statuses push. */
    static RoundPlan draw(int n, int per, long spreadNanos, boolean push, SplittableRandom random) {
        BenchStatus[] all = new BenchStatus[n * per];
        long[] schedule = new long[all.length];
        long[] lastOffset = new long[n];
        for (int req = 0; req < n; req++) {
            for (int j = 0; j < per; j++) {
                int index = req * per + j;
                all[index] = new BenchStatus(push);
                long offset = random.nextLong(spreadNanos);
                schedule[index] = offset << 24 | index;
                lastOffset[req] = Math.max(lastOffset[req], offset);
            }
        }
        java.util.Arrays.sort(schedule);
        return new RoundPlan(all, schedule, lastOffset);
    }
}
