package dev.kvflux.serving.role;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A role's KV blocks shared between clients: one client (the key the proxy names it by, from its API key or address)
 * may hold at most {@code share} of the blocks at once, so that a client sending many long prompts leaves the rest to
 * everyone else; a request that would take its client past that is refused ({@link #tryTake} false: 429
 * {@code client_over_share}) while the client's other requests go on. A request that names no client (one sent
 * straight to the role, not through a proxy) is not counted. Thread-safe.
 */
final class ClientShares {
    /** The share of blocks one client may hold by default: half. */
    static final double DEFAULT_SHARE = 0.5;

    private final long quota;
    private final double share;
    private final Map<String, Long> held = new HashMap<>();
    private final AtomicLong refusals = new AtomicLong();
    /** Refusals by the class of the client's key (its prefix, as the proxy makes it: key:, addr:, hdr:). */
    private final Map<String, AtomicLong> refusalsByClass = Map.of("api_key", new AtomicLong(), "address",
            new AtomicLong(), "header", new AtomicLong());

    /**
     * @param capacity the role's blocks
     * @param share the largest share of them one client may hold, more than 0 and at most 1
     */
    ClientShares(long capacity, double share) {
        if (!(share > 0 && share <= 1)) {
            throw new IllegalArgumentException("a client's share of KV blocks must be more than 0 and at most 1, got "
                    + share);
        }
        this.share = share;
        this.quota = Math.max(1, (long) Math.floor(capacity * share));
    }

    /** Takes {@code blocks} for {@code client} if they fit in its share; true when taken (or not counted). */
    boolean tryTake(String client, int blocks) {
        if (client.isEmpty() || share >= 1) {
            return true;
        }
        synchronized (this) {
            long now = held.getOrDefault(client, 0L);
            if (now + blocks > quota) {
                refusals.incrementAndGet();
                refusalsByClass.get(classOf(client)).incrementAndGet();
                return false;
            }
            held.put(client, now + blocks);
            return true;
        }
    }

    /** Gives back {@code blocks} that {@link #tryTake} took for {@code client}. */
    void give(String client, int blocks) {
        if (client.isEmpty() || share >= 1) {
            return;
        }
        synchronized (this) {
            long left = held.getOrDefault(client, 0L) - blocks;
            if (left <= 0) {
                held.remove(client);
            } else {
                held.put(client, left);
            }
        }
    }

    /** The most blocks one client may hold. */
    long quota() {
        return quota;
    }

    /** The share of the blocks one client may hold. */
    double share() {
        return share;
    }

    /** How many clients hold blocks now. */
    synchronized int clients() {
        return held.size();
    }

    /** Requests refused so far because their client held its share. */
    long refusals() {
        return refusals.get();
    }

    /** Requests refused so far whose client's key is of {@code keyClass}: api_key, address or header. */
    long refusals(String keyClass) {
        AtomicLong n = refusalsByClass.get(keyClass);
        return n == null ? 0 : n.get();
    }

    /** The classes of client keys the meters are tagged with. */
    static final String[] KEY_CLASSES = {"api_key", "address", "header"};

    /** The class of a client key: api_key ({@code key:}), header ({@code hdr:}), else address. */
    static String classOf(String client) {
        if (client.startsWith("key:")) {
            return "api_key";
        }
        return client.startsWith("hdr:") ? "header" : "address";
    }

    /**
     * Registers the shares' meters in {@code meters} under {@code prefix} ({@code kvflux.decode} or
     * {@code kvflux.prefill}): {@code .clients.holding} (clients holding blocks now) and {@code .client.refusals} by
     * the class of the client's key (tag {@code client_class}), so no label grows with the number of clients.
     */
    void register(dev.kvflux.serving.metrics.RoleMetrics meters, String prefix) {
        meters.gauge(prefix + ".clients.holding", "Clients holding KV blocks now", this, ClientShares::clients);
        for (String keyClass : KEY_CLASSES) {
            meters.functionCounter(prefix + ".client.refusals", "Requests refused with 429 because their client held"
                    + " its share of the KV blocks (--client-share), by the class of the client's key", this,
                    s -> s.refusals(keyClass), "client_class", keyClass);
        }
    }

    /** Why a request of {@code blocks} blocks was refused for {@code client}, in words the client can act on. */
    String refusal(int blocks) {
        return "this client already holds its share of this instance's KV blocks (" + quota + " of them, "
                + Math.round(share * 100) + " %; --client-share), and this request needs " + blocks + " more; retry"
                + " when its other requests have ended, or send fewer long prompts at once";
    }
}
