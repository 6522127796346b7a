package dev.kvflux.serving.http;

import dev.kvflux.transfer.notify.BindFailures;
import java.time.Duration;
import java.util.Objects;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.ConnectionProvider;

/**
 * The bounds every kvflux HTTP server and client pool runs with, so that no peer holds a connection, a
 * socket or a pooled connection for ever: the proxy's and the roles' servers come from {@link #server}, their
 * client pools from {@link #pool}, and a port that cannot be bound is explained by {@link #bindFailure}.
 *
 * @param idleTimeout how long a server keeps a connection that waits for a request (before the first, or
 *     between keep-alive requests); default 60 s
 * @param readTimeout how long a server waits for the next bytes of a request's body once it has started;
 *     default 30 s
 * @param requestTimeout how long a server gives a client to send a whole request's body; default 60 s
 * @param poolMaxIdleTime how long a pooled client connection may stay idle before it is closed; default 30 s
 * @param poolEvictEvery how often pools close idle connections in the background, used or not; default 10 s
 * @param maxConnections the most connections one server keeps open, so a flood on one port cannot take the process's
 *     file descriptors from its other ports; a little before it, room is made for a new connection by closing a
 *     stalled or idle one ({@link ConnectionGuard}), and past it the new one is closed as soon as it is accepted;
 *     default 4,096, so that the proxy's two ports together stay well inside a common 20,000-descriptor limit
 * @param perClient how the connections are shared between client addresses: header and write timeouts, bounds per
 *     address and on connections not yet trusted; default {@link ConnectionLimits#DEFAULT}
 */
public record HttpLimits(Duration idleTimeout, Duration readTimeout, Duration requestTimeout,
                         Duration poolMaxIdleTime, Duration poolEvictEvery, int maxConnections,
                         ConnectionLimits perClient) {
    /** The bounds of kvflux's servers and pools unless set otherwise. */
    public static final HttpLimits DEFAULT = new HttpLimits(Duration.ofSeconds(60), Duration.ofSeconds(30),
            Duration.ofSeconds(60), Duration.ofSeconds(30), Duration.ofSeconds(10), 4_096);

    /** These bounds with {@link ConnectionLimits#DEFAULT} per client. */
    public HttpLimits(Duration idleTimeout, Duration readTimeout, Duration requestTimeout, Duration poolMaxIdleTime,
            Duration poolEvictEvery, int maxConnections) {
        this(idleTimeout, readTimeout, requestTimeout, poolMaxIdleTime, poolEvictEvery, maxConnections,
                ConnectionLimits.DEFAULT);
    }

    /** @throws IllegalArgumentException naming a bound that is not positive */
    public HttpLimits {
        Objects.requireNonNull(perClient, "perClient");
        if (maxConnections < 1) {
            throw new IllegalArgumentException("the HTTP server connection cap must be at least 1, got " + maxConnections);
        }
        positive(idleTimeout, "idle timeout");
        positive(readTimeout, "read timeout");
        positive(requestTimeout, "request timeout");
        positive(poolMaxIdleTime, "pool max idle time");
        positive(poolEvictEvery, "pool eviction interval");
    }

    private static void positive(Duration d, String what) {
        Objects.requireNonNull(d, what);
        if (d.isZero() || d.isNegative()) {
            throw new IllegalArgumentException("the HTTP " + what + " must be positive, got " + d);
        }
    }

    /** An HTTP server on {@code host:port} with the {@link #DEFAULT} bounds. */
    public static HttpServer server(String host, int port) {
        return DEFAULT.serverOn(host, port);
    }

    /** A client pool named {@code name} with the {@link #DEFAULT} bounds. */
    public static ConnectionProvider.Builder pool(String name) {
        return DEFAULT.poolNamed(name);
    }

    /** These bounds with other connection limits per client. */
    public HttpLimits withPerClient(ConnectionLimits perClient) {
        return new HttpLimits(idleTimeout, readTimeout, requestTimeout, poolMaxIdleTime, poolEvictEvery, maxConnections,
                perClient);
    }

    /**
     * A guard of a server's connections under these bounds ({@link ConnectionGuard}); {@code trustsSigned}: whether a
     * request whose signature passes makes its connection trusted (a role with a notify secret).
     */
    public ConnectionGuard guard(boolean trustsSigned) {
        return new ConnectionGuard(maxConnections, perClient, trustsSigned);
    }

    /**
     * An HTTP server on {@code host:port} with these bounds and a guard of its own that trusts nothing: see
     * {@link #serverOn(String, int, ConnectionGuard)}.
     */
    public HttpServer serverOn(String host, int port) {
        return serverOn(host, port, guard(false));
    }

    /**
     * An HTTP server on {@code host:port} with these bounds: a connection that sends no request for the idle
     * timeout, or whose request head does not arrive whole within the header timeout, or whose request body pauses for
     * the read timeout or takes longer than the request timeout, or whose client does not read its answer for the
     * write timeout, is closed; {@code guard} shares the connections between client addresses and caps them at
     * {@code maxConnections}.
     */
    public HttpServer serverOn(String host, int port, ConnectionGuard guard) {
        Objects.requireNonNull(guard, "guard");
        return HttpServer.create().host(host).port(port)
                .doOnChannelInit((observer, channel, remote) -> guard.install(channel, remote))
                .idleTimeout(idleTimeout)
                .readTimeout(readTimeout)
                .requestTimeout(requestTimeout);
    }

    /**
     * A client connection pool named {@code name} whose idle connections are closed after the pool max idle
     * time, checked in the background at the eviction interval; callers add their own connection and
     * pending bounds.
     */
    public ConnectionProvider.Builder poolNamed(String name) {
        return ConnectionProvider.builder(name)
                .maxIdleTime(poolMaxIdleTime)
                .evictInBackground(poolEvictEvery);
    }

    /**
     * Why {@code host:port} could not be bound, in words a user can act on: the port is in use, binding
     * it needs privileges, the address is not one of this host's, the host name is unknown, or the port is
     * out of range; else the error's own message.
     */
    /**
     * Whether {@code host} names only this machine: {@code localhost} or a loopback address. A name that does not
     * resolve counts as not loopback.
     */
    public static boolean isLoopback(String host) {
        try {
            for (java.net.InetAddress address : java.net.InetAddress.getAllByName(host)) {
                if (!address.isLoopbackAddress()) {
                    return false;
                }
            }
            return true;
        } catch (java.net.UnknownHostException e) {
            return false;
        }
    }

    public static String bindFailure(String host, int port, Throwable error) {
        return BindFailures.describe(host, port, error);
    }
}
