package dev.kvflux.serving.http;

import java.time.Duration;
import java.util.Objects;

/**
 * How an HTTP server shares its connections between clients ({@link ConnectionGuard}), so that no one client address
 * can hold them all: a client that opens connections and sends their request heads slowly (slowloris), or not at
 * all, or that never reads its answers, loses those connections while everyone else keeps theirs.
 *
 * @param headerTimeout how long a connection may take to send a request's whole head (its request line and headers),
 *     from when it opens or from the first byte of its next request; the connection is closed after it. Default 10 s
 * @param writeTimeout how long a connection may stay unable to take more of its answer (its client does not read)
 *     before it is closed; default 30 s
 * @param maxPerAddress the most connections one client address may have open that are not trusted; one more closes the
 *     address's oldest connection still sending its head, or idle, or is itself closed when there is none. Default
 *     1,024
 * @param maxPendingPerAddress the most connections of one client address still sending their request head; one more
 *     closes the address's oldest such connection (when it has taken at least half a second), or is itself closed.
 *     Default 64
 * @param maxUntrusted on a server that trusts signed requests (a role's, with a notify secret), the most connections
 *     that have not yet carried a request with a valid signature, over all addresses; the proxy's connections are
 *     trusted once their first request passes, so strangers get far fewer than the proxy. Default 256
 * @param maxStalledPerAddress the most connections of one client address whose answers it does not read; one more
 *     closes the one stalled longest. Default 16
 */
public record ConnectionLimits(Duration headerTimeout, Duration writeTimeout, int maxPerAddress,
                               int maxPendingPerAddress, int maxUntrusted, int maxStalledPerAddress) {
    /** The defaults. */
    public static final ConnectionLimits DEFAULT = new ConnectionLimits(Duration.ofSeconds(10), Duration.ofSeconds(30),
            1_024, 64, 256, 16);

    /** @throws IllegalArgumentException naming a bound that is not positive */
    public ConnectionLimits {
        positive(headerTimeout, "header timeout");
        positive(writeTimeout, "write timeout");
        atLeastOne(maxPerAddress, "connections per client address");
        atLeastOne(maxPendingPerAddress, "connections per client address still sending their head");
        atLeastOne(maxUntrusted, "untrusted connections");
        atLeastOne(maxStalledPerAddress, "connections per client address that do not read their answers");
    }

    /** These limits with another header timeout. */
    public ConnectionLimits withHeaderTimeout(Duration headerTimeout) {
        return new ConnectionLimits(headerTimeout, writeTimeout, maxPerAddress, maxPendingPerAddress, maxUntrusted,
                maxStalledPerAddress);
    }

    /** These limits with another write timeout. */
    public ConnectionLimits withWriteTimeout(Duration writeTimeout) {
        return new ConnectionLimits(headerTimeout, writeTimeout, maxPerAddress, maxPendingPerAddress, maxUntrusted,
                maxStalledPerAddress);
    }

    /** These limits with other per-address bounds: open, still sending their head, and not reading their answers. */
    public ConnectionLimits withPerAddress(int maxPerAddress, int maxPendingPerAddress, int maxStalledPerAddress) {
        return new ConnectionLimits(headerTimeout, writeTimeout, maxPerAddress, maxPendingPerAddress, maxUntrusted,
                maxStalledPerAddress);
    }

    /** These limits with another bound on untrusted connections. */
    public ConnectionLimits withMaxUntrusted(int maxUntrusted) {
        return new ConnectionLimits(headerTimeout, writeTimeout, maxPerAddress, maxPendingPerAddress, maxUntrusted,
                maxStalledPerAddress);
    }

    private static void positive(Duration d, String what) {
        Objects.requireNonNull(d, what);
        if (d.isZero() || d.isNegative()) {
            throw new IllegalArgumentException("the HTTP " + what + " must be positive, got " + d);
        }
    }

    private static void atLeastOne(int n, String what) {
        if (n < 1) {
            throw new IllegalArgumentException("the HTTP bound on " + what + " must be at least 1, got " + n);
        }
    }
}
