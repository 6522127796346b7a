package dev.kvflux.serving.api;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * The signatures a role has accepted while they could still be replayed: a signed request is fresh for the
 * secret's max age either side of the clock, so a copy sent again within that time would pass the tag and time
 * checks; this window refuses it. Each signature is kept (as its first 16 bytes) until it would be stale anyway,
 * and at most {@code capacity} are kept: when that many are live, a new request is refused rather than an older
 * signature forgotten, so the bound never reopens the replay. Thread-safe.
 */
public final class ReplayWindow {
    /** Signatures kept at most by default: over 2,000 signed requests a second for a 30 s window. */
    public static final int DEFAULT_CAPACITY = 1 << 17;

    private record Key(long high, long low) {
    }

    private record Entry(Key key, long expiresAtMillis) {
    }

    private final int capacity;
    private final long keepMillis;
    private final LongSupplier clockMillis;
    private final Set<Key> seen = new HashSet<>();
    private final ArrayDeque<Entry> byArrival = new ArrayDeque<>();

    /**
     * @param keepMillis how long after its signing time a signature can still be fresh (the secret's max age)
     */
    public ReplayWindow(int capacity, long keepMillis, LongSupplier clockMillis) {
        if (capacity < 1 || keepMillis < 1) {
            throw new IllegalArgumentException("a replay window needs room for one signature and a positive keep time");
        }
        this.capacity = capacity;
        this.keepMillis = keepMillis;
        this.clockMillis = clockMillis;
    }

    /**
     * Takes the signature {@code tag}, signed at {@code ts}, if it was not seen within the window.
     *
     * @throws RequestAuth.RefusedException {@code replayed_request} if it was; {@code replay_window_full} if the
     *     window holds {@code capacity} live signatures
     */
    public synchronized void accept(long ts, byte[] tag) {
        long now = clockMillis.getAsLong();
        while (!byArrival.isEmpty() && byArrival.peekFirst().expiresAtMillis() - now <= 0) {
            seen.remove(byArrival.pollFirst().key());
        }
        ByteBuffer bytes = ByteBuffer.wrap(tag);
        Key key = new Key(bytes.getLong(0), bytes.getLong(8));
        if (seen.contains(key)) {
            throw new RequestAuth.RefusedException("replayed_request", "the request's signature was already used: a"
                    + " replayed request; the proxy signs every request afresh");
        }
        if (seen.size() >= capacity) {
            throw new RequestAuth.RefusedException("replay_window_full", "this instance already holds " + capacity
                    + " signatures young enough to be replayed, its limit; retry in a few seconds");
        }
        seen.add(key);
        byArrival.addLast(new Entry(key, Math.max(ts, now) + keepMillis));
    }

    /** How many signatures are kept now. */
    public synchronized int size() {
        return seen.size();
    }
}
