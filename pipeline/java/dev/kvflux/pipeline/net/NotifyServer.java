package dev.kvflux.pipeline.net;

import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.NettyInbound;
import reactor.netty.NettyOutbound;
import reactor.netty.tcp.TcpServer;

/**
 * The receiving end of the notify channel: a TCP server that reads length-prefixed msgpack frames,
 * hands each decoded {@link NotifyMessage} to its handler in arrival order per connection, and answers
 * each with a small acknowledgement frame so the sender knows it arrived.
 *
 * <p>A frame whose length prefix is negative or above the maximum, or whose payload is not a message,
 * or, when the server has a {@link NotifyAuth notify secret}, whose tag is missing or wrong or which was
 * signed too long ago, closes the connection it came on and is counted in {@link NotifyMetrics}; every
 * other connection keeps being served. The handler runs on the connection's Netty event loop: it must not block.
 * A handler that throws does not close the connection: the message is still acknowledged, the failure is
 * counted ({@link NotifyMetrics#handlerFailures()}), the server's first is logged at error and later ones at
 * debug.
 */
public final class NotifyServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NotifyServer.class);

    private final DisposableServer server;
    private final NotifyMetrics metrics;
    private final ChannelGroup connections;

    private NotifyServer(DisposableServer server, NotifyMetrics metrics, ChannelGroup connections) {
        this.server = server;
        this.metrics = metrics;
        this.connections = connections;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The address the server listens on (with the real port when 0 was asked). */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.address();
    }

    public NotifyMetrics metrics() {
        return metrics;
    }

    /** Stops listening and closes every connection, as a process exit would; returns once they are closed. */
    @Override
    public void close() {
        server.disposeNow();
        connections.close().awaitUninterruptibly();
    }

    /** Settings of a server; {@link #bind()} starts one. */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port;
        private int maxFrameBytes = Frames.DEFAULT_MAX_FRAME_BYTES;
        private NotifyMetrics metrics = new NotifyMetrics();
        private Consumer<NotifyMessage> handler;
        private NotifyAuth auth;

        private Builder() {
        }

        /** Accept only frames signed with this secret; {@code null} (the default) accepts unsigned frames. */
        public Builder auth(NotifyAuth auth) {
            this.auth = auth;
            return this;
        }

        public Builder host(String host) {
            this.host = Objects.requireNonNull(host, "host");
            return this;
        }

        /** The port to listen on; 0 picks a free one. */
        public Builder port(int port) {
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("notify port " + port + " is not a TCP port (0..65535)");
            }
            this.port = port;
            return this;
        }

        /** The largest payload accepted; a longer frame closes its connection. Default 1 MiB. */
        public Builder maxFrameBytes(int maxFrameBytes) {
            Frames.checkMax(maxFrameBytes);
            this.maxFrameBytes = maxFrameBytes;
            return this;
        }

        public Builder metrics(NotifyMetrics metrics) {
            this.metrics = Objects.requireNonNull(metrics, "metrics");
            return this;
        }

        /** Receives every decoded message, on the connection's event loop; must not block. */
        public Builder handler(Consumer<NotifyMessage> handler) {
            this.handler = Objects.requireNonNull(handler, "handler");
            return this;
        }

        /** Emits the server once it listens; errors if the address cannot be bound. */
        public Mono<NotifyServer> bind() {
            Objects.requireNonNull(handler, "set a handler before binding the notify server");
            Consumer<NotifyMessage> target = handler;
            NotifyMetrics counters = metrics;
            int max = maxFrameBytes;
            Function<byte[], NotifyMessage> decoder = auth == null ? NotifyCodec::decode : auth::verify;
            AtomicBoolean warnedUnauthenticated = new AtomicBoolean();
            AtomicBoolean warnedHandlerFailure = new AtomicBoolean();
            ChannelGroup group = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
            return TcpServer.create()
                    .host(host)
                    .port(port)
                    .doOnConnection(connection -> {
                        counters.connectionsAccepted.increment();
                        group.add(connection.channel());
                        connection.addHandlerLast("kvflux-frames", Frames.decoder(max));
                    })
                    .handle((in, out) -> serve(in, out, decoder, target, counters, max, warnedUnauthenticated,
                            warnedHandlerFailure))
                    .bind()
                    .map(server -> new NotifyServer(server, counters, group))
                    .onErrorMap(e -> new IllegalStateException("cannot listen for notifications on " + host
                            + ":" + port + " (" + e.getMessage() + "); is another process using the port?", e));
        }

        private static Mono<Void> serve(NettyInbound in, NettyOutbound out, Function<byte[], NotifyMessage> decoder,
                Consumer<NotifyMessage> handler, NotifyMetrics metrics, int max, AtomicBoolean warnedUnauthenticated,
                AtomicBoolean warnedHandlerFailure) {
            var acks = in.receive().asByteArray().map(bytes -> {
                NotifyMessage message = decoder.apply(bytes);
                metrics.received.increment();
                try {
                    handler.accept(message);
                } catch (RuntimeException e) {
                    handlerFailed(message, e, metrics, warnedHandlerFailure);
                }
                return Frames.frame(out.alloc(), NotifyCodec.encodeAck(message.transferId()));
            }).onErrorResume(error -> {
                if (Frames.isBadLength(error)) {
                    metrics.oversizedFrames.increment();
                    LOG.warn("closing a notify connection: frame length rejected ({}); the maximum is {} bytes",
                            error.getMessage(), max);
                } else if (error instanceof UnauthenticatedFrameException) {
                    metrics.unauthenticatedFrames.increment();
                    if (warnedUnauthenticated.compareAndSet(false, true)) {
                        LOG.warn("closing a notify connection: {}. Later rejections are counted"
                                + " (unauthenticated_frames) and logged at debug level", error.getMessage());
                    } else {
                        LOG.debug("closing a notify connection: {}", error.getMessage());
                    }
                } else if (error instanceof MalformedFrameException) {
                    metrics.malformedFrames.increment();
                    LOG.warn("closing a notify connection: {}", error.getMessage());
                } else {
                    LOG.warn("closing a notify connection after an error: {}", error.toString());
                }
                return Mono.empty();
            });
            return out.send(acks, buf -> true).then();
        }

        /**
         * Counts a handler failure; logs the server's first at error with what to do and later ones at debug,
         * so a handler that fails on every message cannot flood the log at the message rate.
         */
        private static void handlerFailed(NotifyMessage message, RuntimeException error, NotifyMetrics metrics,
                AtomicBoolean warned) {
            metrics.handlerFailures.increment();
            if (warned.compareAndSet(false, true)) {
                LOG.error("notify handler failed on {}: the message was acknowledged but not acted on, and the"
                        + " connection stays open. This is a bug in the handler; report it with this stack trace."
                        + " Later handler failures are counted (handler_failures in /metrics) and logged at debug"
                        + " level", message, error);
            } else {
                LOG.debug("notify handler failed on {} (failure {})", message, metrics.handlerFailures(), error);
            }
        }
    }
}
