package dev.kvflux.pipeline.proxy;

import java.net.BindException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Locale;
import reactor.netty.http.server.HttpServer;
import reactor.netty.resources.ConnectionProvider;

/**
 * The bounds every kvflux HTTP server and client pool runs with, so that no peer holds a connection, a
 * socket or a pooled connection for ever: the proxy's and the roles' servers come from {@link #server}, their
 * client pools from {@link #pool}, and a port that cannot be bound is explained by {@link #bindFailure}.
 */
public final class HttpLimits {
    /** How long a server keeps a connection that waits for a request (between keep-alive requests, or before the first). */
    public static final Duration IDLE_TIMEOUT = Duration.ofSeconds(60);
    /** How long a server waits for the next bytes of a request's body once the request has started. */
    public static final Duration READ_TIMEOUT = Duration.ofSeconds(30);
    /** How long a server gives a client to send a whole request, headers to last body byte. */
    public static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(60);
    /** How long a pooled client connection may stay idle before it is closed. */
    public static final Duration POOL_MAX_IDLE_TIME = Duration.ofSeconds(30);
    /** How often pools close their idle and expired connections in the background, even when unused. */
    public static final Duration POOL_EVICT_EVERY = Duration.ofSeconds(10);

    private HttpLimits() {
    }

    /**
     * An HTTP server on {@code host:port} with {@link #IDLE_TIMEOUT}, {@link #READ_TIMEOUT} and
     * {@link #REQUEST_TIMEOUT}: a connection that sends nothing, or a request that trickles, is closed.
     */
    public static HttpServer server(String host, int port) {
        return HttpServer.create().host(host).port(port)
                .idleTimeout(IDLE_TIMEOUT)
                .readTimeout(READ_TIMEOUT)
                .requestTimeout(REQUEST_TIMEOUT);
    }

    /**
     * A client connection pool named {@code name} whose idle connections are closed after
     * {@link #POOL_MAX_IDLE_TIME}, checked every {@link #POOL_EVICT_EVERY} in the background; callers add
     * their own connection and pending bounds.
     */
    public static ConnectionProvider.Builder pool(String name) {
        return ConnectionProvider.builder(name)
                .maxIdleTime(POOL_MAX_IDLE_TIME)
                .evictInBackground(POOL_EVICT_EVERY);
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
