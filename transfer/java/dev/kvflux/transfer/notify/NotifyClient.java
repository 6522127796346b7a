package dev.kvflux.transfer.notify;

import dev.kvflux.bindings.DurationText;
import io.netty.channel.ChannelOption;
import java.net.InetSocketAddress;
import java.nio.channels.ClosedChannelException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.Connection;
import reactor.netty.resources.LoopResources;
import reactor.netty.tcp.TcpClient;
import reactor.util.retry.Retry;

/**
 * The sending end of the notify channel. Keeps one connection per peer address, opened on first use and
 * opened again after it fails or an acknowledgement does not come within the ack timeout; a message counts as sent only when the peer acknowledged it, so a
 * message written into a connection the peer had already closed is sent again.
 *
 * <p>{@link #send} retries a failed attempt with backoff until the message's deadline; past it the
 * message is counted as undeliverable and logged. Timers run on the client's scheduler
 * ({@link Schedulers#parallel()} unless set, looked up at subscription). A connection on which nothing
 * has been read for the idle limit (default {@value #DEFAULT_IDLE_LIMIT_SECONDS} s, shorter than the server's
 * idle timeout) and nothing awaits an acknowledgement is closed, so a pool that served a burst gives its file
 * descriptors back; the next send opens a fresh one.
 */
public final class NotifyClient implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NotifyClient.class);
    /** Default idle limit of a pooled connection, in seconds. */
    public static final int DEFAULT_IDLE_LIMIT_SECONDS = 60;

    private final NotifyRecorder recorder;
    private final Duration minBackoff;
    private final Duration maxBackoff;
    private final Duration ackTimeout;
    private final Scheduler scheduler;
    private final int maxFrameBytes;
    private final NotifyAuth auth;
    private final Duration idleLimit;
    private final LoopResources loops;
    private final Map<InetSocketAddress, Mono<Peer>> peers = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private NotifyClient(Builder b) {
        this.recorder = b.recorder;
        this.minBackoff = b.minBackoff;
        this.maxBackoff = b.maxBackoff;
        this.ackTimeout = b.ackTimeout;
        this.scheduler = b.scheduler;
        this.maxFrameBytes = b.maxFrameBytes;
        this.auth = b.auth;
        this.idleLimit = b.idleLimit;
        this.loops = b.loops;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A client with the defaults: 20 ms to 500 ms backoff, 2 s to acknowledge, nothing recorded. */
    public static NotifyClient create() {
        return builder().build();
    }

    /**
     * Sends {@code message} to the notify server at {@code to}.
     *
     * @return a {@code Mono} that emits {@code true} once the peer acknowledged the message, or
     *     {@code false} when {@code within} (counted from subscription) passed first; then the message is
     *     counted as undeliverable and logged. It also emits {@code false}, at once, once the client is
     *     closed. It errors only with an {@link IllegalArgumentException} when the message is larger than
     *     the frame limit, which no retry could fix.
     */
    public Mono<Boolean> send(InetSocketAddress to, NotifyMessage message, Duration within) {
        Objects.requireNonNull(to, "to");
        Objects.requireNonNull(message, "message");
        Objects.requireNonNull(within, "within");
        int length = payload(message).length;
        if (length > maxFrameBytes) {
            return Mono.error(new IllegalArgumentException(message.type() + " for " + message.transferId() + " is "
                    + length + " bytes, over the " + maxFrameBytes + "-byte frame limit"));
        }
        return Mono.defer(() -> {
            Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
            return Mono.defer(() -> peer(to).flatMap(peer -> peer.send(payload(message), message.transferId())
                            .timeout(ackTimeout, Mono.defer(() -> peer.ackTimedOut(to, ackTimeout)), on)))
                    .retryWhen(Retry.backoff(Long.MAX_VALUE, minBackoff).maxBackoff(maxBackoff).scheduler(on)
                            .filter(error -> !closed)
                            .doBeforeRetry(signal -> {
                                recorder.record(NotifyEvent.SEND_RETRIED);
                                LOG.debug("retrying {} for {} to {}: {}", message.type(), message.transferId(), to,
                                        signal.failure().toString());
                            }))
                    .timeout(within, on)
                    .doOnSuccess(ok -> recorder.record(NotifyEvent.SENT))
                    .thenReturn(true)
                    .onErrorResume(error -> {
                        recorder.record(NotifyEvent.UNDELIVERABLE);
                        LOG.warn("{} for transfer {} is undeliverable to {}: {}", message.type(), message.transferId(),
                                to, closed ? "the notify client was closed" : "no acknowledgement within " + DurationText.of(within));
                        return Mono.just(false);
                    });
        });
    }

    /** The frame payload, signed afresh for each attempt when the client has a secret. */
    private byte[] payload(NotifyMessage message) {
        return auth == null ? NotifyCodec.encode(message) : auth.sign(message);
    }

    /** Closes every connection; sends still retrying give up, and later sends emit {@code false} at once. */
    @Override
    public void close() {
        closed = true;
        for (Mono<Peer> peer : peers.values()) {
            peer.subscribe(Peer::close, error -> { });
        }
        peers.clear();
    }

    /** The open connection to {@code to}, or a new one if there is none or it was closed. */
    private Mono<Peer> peer(InetSocketAddress to) {
        if (closed) {
            return Mono.error(new ClosedChannelException());
        }
        Mono<Peer> slot = peers.computeIfAbsent(to, this::connect);
        return slot.onErrorResume(error -> {
            peers.remove(to, slot);
            return Mono.error(error);
        }).flatMap(peer -> {
            if (peer.connection.isDisposed()) {
                peers.remove(to, slot);
                return Mono.error(new ClosedChannelException());
            }
            return Mono.just(peer);
        });
    }

    private Mono<Peer> connect(InetSocketAddress address) {
        int max = maxFrameBytes;
        TcpClient tcp = TcpClient.create();
        return (loops != null ? tcp.runOn(loops) : tcp)
                .remoteAddress(() -> address)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 1000)
                .doOnConnected(connection -> connection.addHandlerLast("kvflux-frames", Frames.decoder(max)))
                .connect()
                .map(connection -> {
                    if (closed) {
                        connection.dispose();
                        throw new IllegalStateException("the notify client was closed while connecting to " + address);
                    }
                    recorder.record(NotifyEvent.CLIENT_CONNECTION_OPENED);
                    Peer peer = new Peer(connection);
                    connection.inbound().receive().asByteArray()
                            .subscribe(peer::acknowledged, peer::failAll, peer::failAllClosed);
                    connection.onDispose(peer::failAllClosed);
                    connection.onReadIdle(idleLimit.toMillis(), () -> {
                        if (peer.closeIfIdle()) {
                            recorder.record(NotifyEvent.CLIENT_CONNECTION_CLOSED_IDLE);
                        }
                    });
                    return peer;
                })
                .cache();
    }

    /** One connection and the messages written on it that await their acknowledgement, in order. */
    private static final class Peer {
        private final Connection connection;
        private final ArrayDeque<Pending> pending = new ArrayDeque<>();

        Peer(Connection connection) {
            this.connection = connection;
        }

        Mono<Void> send(byte[] payload, String transferId) {
            return Mono.defer(() -> {
                Sinks.Empty<Void> acked = Sinks.empty();
                synchronized (this) {
                    if (connection.isDisposed()) {
                        return Mono.error(new ClosedChannelException());
                    }
                    pending.add(new Pending(transferId, acked));
                    connection.channel().writeAndFlush(Frames.frame(connection.channel().alloc(), payload))
                            .addListener(write -> {
                                if (!write.isSuccess()) {
                                    failAll(write.cause());
                                }
                            });
                }
                return acked.asMono();
            });
        }

        void acknowledged(byte[] frame) {
            Pending head;
            synchronized (this) {
                head = pending.poll();
            }
            String id;
            try {
                id = NotifyCodec.decodeAck(frame);
            } catch (MalformedFrameException e) {
                failAll(e);
                return;
            }
            if (head == null || !head.transferId.equals(id)) {
                failAll(new MalformedFrameException("acknowledgement for " + id + " does not match the message sent"));
                if (head != null) {
                    head.acked.tryEmitError(new MalformedFrameException("acknowledgement out of order"));
                }
                return;
            }
            head.acked.tryEmitEmpty();
        }

        /**
         * No acknowledgement came in time: the peer may be wedged or the connection half-open, so the
         * connection is dropped and the next attempt opens a fresh one.
         */
        Mono<Void> ackTimedOut(InetSocketAddress to, Duration ackTimeout) {
            TimeoutException timeout = new TimeoutException("no acknowledgement from " + to + " within "
                    + DurationText.of(ackTimeout) + "; reconnecting");
            failAll(timeout);
            return Mono.error(timeout);
        }

        void failAllClosed() {
            failAll(new ClosedChannelException());
        }

        void failAll(Throwable error) {
            connection.dispose();
            Pending[] failed;
            synchronized (this) {
                failed = pending.toArray(Pending[]::new);
                pending.clear();
            }
            for (Pending p : failed) {
                p.acked.tryEmitError(error);
            }
        }

        /** Closes the connection if nothing awaits an acknowledgement on it; whether it did. */
        boolean closeIfIdle() {
            synchronized (this) {
                if (!pending.isEmpty() || connection.isDisposed()) {
                    return false;
                }
                connection.dispose();
            }
            return true;
        }

        void close() {
            connection.dispose();
        }
    }

    private record Pending(String transferId, Sinks.Empty<Void> acked) {
    }

    /**
     * Settings of a client; immutable: every setter returns a changed copy, so one builder can be shared and
     * specialised. {@link #build()} makes a client, which opens no connection until its first send.
     */
    public static final class Builder {
        private NotifyRecorder recorder = NotifyRecorder.NOOP;
        private Duration minBackoff = Duration.ofMillis(20);
        private Duration maxBackoff = Duration.ofMillis(500);
        private Duration ackTimeout = Duration.ofSeconds(2);
        private Scheduler scheduler;
        private int maxFrameBytes = Frames.DEFAULT_MAX_FRAME_BYTES;
        private NotifyAuth auth;
        private Duration idleLimit = Duration.ofSeconds(DEFAULT_IDLE_LIMIT_SECONDS);
        private LoopResources loops;

        private Builder() {
        }

        private Builder(Builder from) {
            recorder = from.recorder;
            minBackoff = from.minBackoff;
            maxBackoff = from.maxBackoff;
            ackTimeout = from.ackTimeout;
            scheduler = from.scheduler;
            maxFrameBytes = from.maxFrameBytes;
            auth = from.auth;
            idleLimit = from.idleLimit;
            loops = from.loops;
        }

        private Builder with(java.util.function.Consumer<Builder> change) {
            Builder copy = new Builder(this);
            change.accept(copy);
            return copy;
        }

        /** How long a pooled connection may go without reading anything before it is closed. Default 60 s. */
        public Builder idleLimit(Duration idleLimit) {
            if (idleLimit.isNegative() || idleLimit.isZero()) {
                throw new IllegalArgumentException("notify client idle limit must be positive, got "
                        + DurationText.of(idleLimit));
            }
            return with(b -> b.idleLimit = idleLimit);
        }

        /** Sign every message with this secret; {@code null} (the default) sends unsigned messages. */
        public Builder auth(NotifyAuth auth) {
            return with(b -> b.auth = auth);
        }

        /** Where sends, retries, give-ups and connections are reported; default {@link NotifyRecorder#NOOP}. */
        public Builder recorder(NotifyRecorder recorder) {
            Objects.requireNonNull(recorder, "recorder");
            return with(b -> b.recorder = recorder);
        }

        /** The first and the longest pause between attempts. Default 20 ms and 500 ms. */
        public Builder backoff(Duration min, Duration max) {
            if (min.isNegative() || min.isZero() || max.compareTo(min) < 0) {
                throw new IllegalArgumentException("backoff must be positive with max >= min, got "
                        + DurationText.of(min) + " .. " + DurationText.of(max));
            }
            return with(b -> {
                b.minBackoff = min;
                b.maxBackoff = max;
            });
        }

        /** How long one attempt waits for the peer's acknowledgement before it counts as failed. Default 2 s. */
        public Builder ackTimeout(Duration ackTimeout) {
            if (ackTimeout.isNegative() || ackTimeout.isZero()) {
                throw new IllegalArgumentException("ack timeout must be positive, got " + DurationText.of(ackTimeout));
            }
            return with(b -> b.ackTimeout = ackTimeout);
        }

        /** The timers' scheduler; default {@code Schedulers.parallel()}, looked up at each send's subscription. */
        public Builder scheduler(Scheduler scheduler) {
            Objects.requireNonNull(scheduler, "scheduler");
            return with(b -> b.scheduler = scheduler);
        }

        /**
         * The event loops the client's connections run on; the caller owns them and disposes of them after closing
         * the client. Default: Reactor Netty's global TCP resources.
         */
        public Builder loops(LoopResources loops) {
            Objects.requireNonNull(loops, "loops");
            return with(b -> b.loops = loops);
        }

        /** The largest payload sent; a larger message fails its send at once. Default 1 MiB. */
        public Builder maxFrameBytes(int maxFrameBytes) {
            Frames.checkMax(maxFrameBytes);
            return with(b -> b.maxFrameBytes = maxFrameBytes);
        }

        /** A client with these settings. */
        public NotifyClient build() {
            return new NotifyClient(this);
        }
    }
}
