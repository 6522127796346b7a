package dev.kvflux.transfer;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Releases that reached decode before the request they are about: prefill can finish with a transfer (its
 * client went away, it was aborted) and say {@code release} before decode's copy of the request has
 * allocated its blocks. Kept so that those blocks are freed when the request ends instead of waiting out
 * the lease. Bounded: at most {@code maxEntries} ids (each at most 256 bytes, so a few MiB at most), each
 * forgotten after {@code keepNanos}; the oldest go first. Not thread-safe: the caller holds one lock across
 * a release and an allocation, so that neither can fall between the other's check and its record.
 */
final class EarlyReleases {
    private final int maxEntries;
    private final long keepNanos;
    private final LongSupplier nanoClock;
    /** Transfer id → when its release may be forgotten; in arrival order. */
    private final LinkedHashMap<String, Long> byId = new LinkedHashMap<>();
    private long dropped;

    EarlyReleases(int maxEntries, long keepNanos, LongSupplier nanoClock) {
        if (maxEntries < 1 || keepNanos <= 0) {
            throw new IllegalArgumentException("early releases need room for one id and a positive keep time");
        }
        this.maxEntries = maxEntries;
        this.keepNanos = keepNanos;
        this.nanoClock = nanoClock;
    }

    /** Remembers a release for {@code transferId}, which holds no blocks yet. */
    void remember(String transferId) {
        long now = nanoClock.getAsLong();
        expire(now);
        byId.remove(transferId);
        if (byId.size() == maxEntries) {
            Iterator<String> oldest = byId.keySet().iterator();
            oldest.next();
            oldest.remove();
            dropped++;
        }
        byId.put(transferId, now + keepNanos);
    }

    /** Whether a release for {@code transferId} came before its blocks; forgets it either way. */
    boolean take(String transferId) {
        long now = nanoClock.getAsLong();
        expire(now);
        return byId.remove(transferId) != null;
    }

    /** Releases kept now. */
    int size() {
        return byId.size();
    }

    /** Releases forgotten to stay within {@code maxEntries} before their request came. */
    long dropped() {
        return dropped;
    }

    private void expire(long now) {
        Iterator<Map.Entry<String, Long>> it = byId.entrySet().iterator();
        while (it.hasNext() && now - it.next().getValue() >= 0) {
            it.remove();
        }
    }
}
