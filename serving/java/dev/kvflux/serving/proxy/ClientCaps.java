package dev.kvflux.serving.proxy;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The proxy's memory of clients over their share. The roles refuse a client's request with 429
 * {@code client_over_share} when the client already holds its share of their KV blocks or prefill queue; the proxy
 * then caps that client at the requests it has in flight, and refuses its next ones itself, without reading their
 * bodies or sending them on, until one of its requests ends. Each request that ends well raises the cap by one, so a
 * client whose requests grow smaller is let back up; the cap is forgotten when the client has nothing in flight.
 *
 * <p>Only clients with requests in flight are kept, so what it holds is bounded by the proxy's connections.
 * Thread-safe.
 */
final class ClientCaps {
    private final ConcurrentHashMap<String, State> clients = new ConcurrentHashMap<>();

    private static final class State {
        int inFlight;
        int cap = Integer.MAX_VALUE;
    }

    /** Counts a request of {@code client} in, or returns its cap when the client is at it (and counts nothing). */
    int tryStart(String client) {
        int[] refusedAt = {-1};
        clients.compute(client, (key, state) -> {
            State s = state != null ? state : new State();
            if (s.inFlight >= s.cap) {
                refusedAt[0] = s.cap;
            } else {
                s.inFlight++;
            }
            return s.inFlight == 0 ? null : s;
        });
        return refusedAt[0];
    }

    /**
     * A request counted in by {@link #tryStart} has ended; {@code overShare} when a role refused it as over the
     * client's share.
     */
    void ended(String client, boolean overShare) {
        clients.computeIfPresent(client, (key, s) -> {
            if (overShare) {
                // the others in flight are what the roles took of this client's; the refused one is not
                s.cap = Math.max(1, s.inFlight - 1);
            } else if (s.cap != Integer.MAX_VALUE) {
                s.cap++;
            }
            s.inFlight--;
            return s.inFlight == 0 ? null : s;
        });
    }

    /** How many clients have requests in flight. */
    int clients() {
        return clients.size();
    }
}
