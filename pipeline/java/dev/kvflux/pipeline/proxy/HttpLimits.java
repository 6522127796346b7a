package dev.kvflux.pipeline.proxy;

import java.net.BindException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
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
 */
public record HttpLimits(Duration idleTimeout, Duration readTimeout, Duration requestTimeout,
                         Duration poolMaxIdleTime, Duration poolEvictEvery) {
    /** The bounds of kvflux's servers and pools unless set otherwise. */
    /** The most connections one HTTP server holds at once, well under a usual 20,000-descriptor limit. */
    public static final int DEFAULT_MAX_CONNECTIONS = 4096;

    private static final Logger LOG = LoggerFactory.getLogger(HttpLimits.class);
    private static final long WARN_EVERY_NANOS = 10_000_000_000L;

    public static final HttpLimits DEFAULT = new HttpLimits(Duration.ofSeconds(60), Duration.ofSeconds(30),
            Duration.ofSeconds(60), Duration.ofSeconds(30), Duration.ofSeconds(10));

    /** @throws IllegalArgumentException naming a bound that is not positive */
    public HttpLimits {
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

    /**
     * An HTTP server on {@code host:port} with these bounds: a connection that sends no request for the idle
     * timeout, or a request whose body pauses for the read timeout or takes longer than the request
     * timeout, is closed.
     */
    public HttpServer serverOn(String host, int port) {
        return serverOn(host, port, DEFAULT_MAX_CONNECTIONS);
    }

    /**
     * {@link #serverOn(String, int)} holding at most {@code maxConnections} connections at once: one more is
     * closed as soon as it is accepted, so a flood of idle connections on one port cannot use up the
     * process's file descriptors and take its other ports (notify, discovery) down with it. A refusal is
     * logged at warn at most once per 10 s, with the count since the last.
     */
    public HttpServer serverOn(String host, int port, int maxConnections) {
        if (maxConnections < 1) {
            throw new IllegalArgumentException("the HTTP max connections must be positive, got " + maxConnections);
        }
        AtomicInteger open = new AtomicInteger();
        AtomicLong refused = new AtomicLong();
        AtomicLong lastWarnNanos = new AtomicLong(System.nanoTime() - WARN_EVERY_NANOS);
        return HttpServer.create().host(host).port(port)
                .idleTimeout(idleTimeout)
                .readTimeout(readTimeout)
                .requestTimeout(requestTimeout)
                .doOnChannelInit((observer, channel, remote) -> {
                    if (open.incrementAndGet() > maxConnections) {
                        open.decrementAndGet();
                        long count = refused.incrementAndGet();
                        long last = lastWarnNanos.get();
                        long now = System.nanoTime();
                        if (now - last >= WARN_EVERY_NANOS && lastWarnNanos.compareAndSet(last, now)) {
                            refused.addAndGet(-count);
                            LOG.warn("HTTP port {}: closed {} new connection(s) in the last 10 s; {} are open, the"
                                    + " maximum", port, count, maxConnections);
                        }
                        channel.close();
                        return;
                    }
                    channel.closeFuture().addListener(f -> open.decrementAndGet());
                });
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
    public static String bindFailure(String host, int port, Throwable error) {
        if (port < 0 || port > 65535) {
            return "port " + port + " is out of range; use 1 to 65535, or 0 for any free port";
        }
        for (Throwable e = error; e != null; e = e.getCause() == e ? null : e.getCause()) {
            String message = String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT);
            if (message.contains("address already in use")) {
                return "port " + port + " on " + host + " is in use by another process; stop it or pick another port";
            }
            if (message.contains("permission denied") || message.contains("access denied")) {
                return "binding port " + port + " needs privileges this process lacks (ports under 1024 usually"
                        + " need root); pick a port from 1024 up";
            }
            if (message.contains("cannot assign requested address") || message.contains("address not available")) {
                return "address " + host + " is not one of this host's addresses; bind 127.0.0.1, 0.0.0.0 or an"
                        + " address of one of its interfaces";
            }
            if (e instanceof UnknownHostException || message.contains("unresolved")
                    || message.contains("name or service not known")) {
                return "host " + host + " cannot be resolved; give an IP address or a known host name";
            }
            if (message.contains("port out of range")) {
                return "port " + port + " is out of range; use 1 to 65535, or 0 for any free port";
            }
            if (e instanceof BindException) {
                return e.getMessage();
            }
        }
        return String.valueOf(error.getMessage());
    }
}
