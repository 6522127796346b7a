package dev.kvflux.transfer.notify;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.transfer.LogContext;
import io.netty.buffer.ByteBuf;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.NettyInbound;
import reactor.netty.NettyOutbound;
import reactor.netty.resources.LoopResources;
import reactor.netty.tcp.TcpServer;

/**
 * The receiving end of the notify channel: a TCP server that reads length-prefixed msgpack frames, hands each
 * decoded {@link NotifyMessage} to its handler in arrival order per connection, and answers each with a small
 * acknowledgement frame so the sender knows it arrived.
 *
 * <p>Every byte is treated as hostile. A frame whose length prefix is negative or above the maximum, whose payload
 * is not a message ({@link NotifyCodec}'s bounded decoding), or, when the server has a {@link NotifyAuth notify
 * secret}, whose tag (checked on the raw bytes before any decoding) is wrong or which was signed too long ago,
 * closes the connection it came on and is reported by kind to its {@link NotifyRecorder}; so is any error while
 * handling a frame, {@link Error}s included: none reaches the event loop, and every other connection keeps being
 * served. Connections are bounded: at most {@link Builder#maxConnections} are open (more are closed at once and
 * counted), a started frame must complete within the frame read timeout, and a connection on which nothing arrives
 * for the idle timeout is closed. Warnings about rejected frames quote peer text only escaped and are rate-limited
 * ({@link RateLimitedLog}).
 *
 * <p>The handler runs on the connection's Netty event loop: it must not block. A handler that throws does not close
 * the connection: the message is still acknowledged, the failure is counted ({@link NotifyEvent#HANDLER_FAILED}),
 * the server's first is logged at error and later ones at debug.
 */
public final class NotifyServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NotifyServer.class);

    /** Default most open connections. */
    public static final int DEFAULT_MAX_CONNECTIONS = 1024;
    /** Default most bytes of partly received frames held over all connections: 64 frames of the 1 MiB maximum. */
    public static final long DEFAULT_MAX_BUFFERED_BYTES = 64L << 20;
    /** Default time a started frame has to arrive whole. */
    public static final Duration DEFAULT_FRAME_READ_TIMEOUT = Duration.ofSeconds(10);
    /** Default time a connection may stay silent; longer than {@link NotifyClient}'s idle limit. */
    public static final Duration DEFAULT_IDLE_TIMEOUT = Duration.ofSeconds(120);
    /**
     * The default of the most bytes read from one connection per turn of its event loop: a peer streaming large frames
     * then yields to the other connections on that loop after every 64 KiB instead of after Netty's 16 reads of up to
     * 64 KiB each (1 MiB).
     */
    public static final int DEFAULT_READ_BUDGET_BYTES = 64 << 10;
    /**
     * The default bulk rate of one server: 16 MiB/s of reads larger than a single notification, over all its
     * connections. That is 1,800 block lists a second of 16K-token prompts (9 KB each), and a list of a million-token
     * prompt (65,536 blocks, about 600 KB) passes in one burst; a peer streaming large frames gets no more, and cannot
     * make the server, or the host, spend more CPU on them than this rate costs.
     */
    public static final long DEFAULT_BULK_BYTES_PER_SECOND = 16L << 20;
    /**
     * The event loops of every notify server of this process, apart from the HTTP servers' and clients': a peer's
     * frames cannot delay completions, and the HTTP traffic cannot delay acknowledgements. Half the cores, and at least
     * two threads (daemon).
     */
    private static final LoopResources LOOPS = LoopResources.create("kvflux-notify",
            Math.max(2, Runtime.getRuntime().availableProcessors() / 2), true);

    /** How long {@link Builder#bindNow()} waits for the port. */
    private static final Duration BIND_WITHIN = Duration.ofSeconds(10);

    private final DisposableServer server;
    /** Its connections' group, warnings and buffered bytes, and whether it is closing. */
    private final Connections guard;

    private NotifyServer(DisposableServer server, Connections guard) {
        this.server = server;
        this.guard = guard;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The address the server listens on (with the real port when 0 was asked). */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.address();
    }

    /** Bytes of partly received frames the server holds now, over all its connections. */
    long bufferedBytes() {
        return guard.buffered().get();
    }

    /** How many connections are open now. */
    public int openConnections() {
        return guard.group().size();
    }

    /** Stops listening and closes every connection, as a process exit would; returns once they are closed. */
    @Override
    public void close() {
        guard.closed().set(true); // a connection accepted from now on is closed at once
        server.disposeNow();
        guard.group().close().awaitUninterruptibly();
        guard.warnings().close();
    }

    /**
     * Settings of a server; immutable: every setter returns a changed copy. {@link #bind()} or {@link #bindNow()}
     * starts one. A handler must be set; everything else has a default.
     */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port;
        private int maxFrameBytes = Frames.DEFAULT_MAX_FRAME_BYTES;
        private int maxConnections = DEFAULT_MAX_CONNECTIONS;
        private long maxBufferedBytes = DEFAULT_MAX_BUFFERED_BYTES;
        private Duration frameReadTimeout = DEFAULT_FRAME_READ_TIMEOUT;
        private Duration idleTimeout = DEFAULT_IDLE_TIMEOUT;
        private Duration warnPeriod = RateLimitedLog.DEFAULT_PERIOD;
        private int readBudgetBytes = DEFAULT_READ_BUDGET_BYTES;
        private long bulkBytesPerSecond = DEFAULT_BULK_BYTES_PER_SECOND;
        private NotifyRecorder recorder = NotifyRecorder.NOOP;
        private Consumer<NotifyMessage> handler;
        private NotifyAuth auth;
        private Set<NotifyMessage.Type> accepted;
        private LoopResources loops;

        private Builder() {
        }

        private Builder(Builder from) {
            host = from.host;
            port = from.port;
            maxFrameBytes = from.maxFrameBytes;
            maxConnections = from.maxConnections;
            maxBufferedBytes = from.maxBufferedBytes;
            frameReadTimeout = from.frameReadTimeout;
            idleTimeout = from.idleTimeout;
            warnPeriod = from.warnPeriod;
            readBudgetBytes = from.readBudgetBytes;
            bulkBytesPerSecond = from.bulkBytesPerSecond;
            recorder = from.recorder;
            handler = from.handler;
            auth = from.auth;
            accepted = from.accepted;
            loops = from.loops;
        }

        private Builder with(Consumer<Builder> change) {
            Builder copy = new Builder(this);
            change.accept(copy);
            return copy;
        }

        /**
         * Take only messages of these types; a frame of another type closes its connection and counts as malformed,
         * before the rest of it is decoded. Default: every type.
         */
        public Builder accepts(NotifyMessage.Type... types) {
            if (types.length == 0) {
                throw new IllegalArgumentException("a notify server must accept at least one message type");
            }
            Set<NotifyMessage.Type> set = Set.of(types);
            return with(b -> b.accepted = set);
        }

        /** The event loops it serves on, the caller's to dispose of after {@link #close}; default the notify servers' own. */
        public Builder loops(LoopResources loops) {
            Objects.requireNonNull(loops, "loops");
            return with(b -> b.loops = loops);
        }

        /** Accept only frames signed with this secret; {@code null} (the default) accepts unsigned frames. */
        public Builder auth(NotifyAuth auth) {
            return with(b -> b.auth = auth);
        }

        /** The host name or address to listen on. Default {@code 127.0.0.1}. */
        public Builder host(String host) {
            Objects.requireNonNull(host, "host");
            return with(b -> b.host = host);
        }

        /** The port to listen on; 0 (the default) picks a free one. */
        public Builder port(int port) {
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("notify port " + port + " is not a TCP port (0..65535)");
            }
            return with(b -> b.port = port);
        }

        /** The largest payload accepted; a longer frame closes its connection. Default 1 MiB. */
        public Builder maxFrameBytes(int maxFrameBytes) {
            Frames.checkMax(maxFrameBytes);
            return with(b -> b.maxFrameBytes = maxFrameBytes);
        }

        /** The most connections open at once; one more is closed as soon as it is accepted. Default 1024. */
        public Builder maxConnections(int maxConnections) {
            if (maxConnections < 1 || maxConnections > 1 << 20) {
                throw new IllegalArgumentException("notify max connections " + maxConnections
                        + " is out of range; use 1 to 1048576 (the default is " + DEFAULT_MAX_CONNECTIONS + ")");
            }
            return with(b -> b.maxConnections = maxConnections);
        }

        /**
         * The most bytes of partly received frames the server holds over all its connections; a connection whose bytes
         * would take it past this is closed and counted ({@link NotifyEvent#CLOSED_BUFFER_BUDGET}), so many peers each
         * sending most of a large frame cannot make it buffer gigabytes. Default 64 MiB; at least one frame.
         */
        public Builder maxBufferedBytes(long maxBufferedBytes) {
            if (maxBufferedBytes < Frames.PREFIX + 16 || maxBufferedBytes > (16L << 30)) {
                throw new IllegalArgumentException("notify buffered-bytes budget " + maxBufferedBytes
                        + " is out of range; use 20 bytes to 16 GiB (the default is 64 MiB)");
            }
            return with(b -> b.maxBufferedBytes = maxBufferedBytes);
        }

        /**
         * The connection cap, the two timeouts and the bulk rate of {@code limits} (its peer budget is the handler's).
         */
        public Builder limits(NotifyLimits limits) {
            Objects.requireNonNull(limits, "limits");
            return maxConnections(limits.maxConnections()).frameReadTimeout(limits.frameReadTimeout())
                    .idleTimeout(limits.idleTimeout()).bulkBytesPerSecond(limits.bulkBytesPerSecond());
        }

        /** How long a frame may take to arrive once its first byte has. Default 10 s. */
        public Builder frameReadTimeout(Duration frameReadTimeout) {
            Duration checked = positive(frameReadTimeout, "frame read timeout");
            return with(b -> b.frameReadTimeout = checked);
        }

        /** How long a connection may stay silent before it is closed. Default 120 s. */
        public Builder idleTimeout(Duration idleTimeout) {
            Duration checked = positive(idleTimeout, "idle timeout");
            return with(b -> b.idleTimeout = checked);
        }

        /**
         * The most bytes read from one connection before the other connections of its event loop get their turn; a
         * frame longer than this arrives over several turns. Default 64 KiB; 4 KiB to 1 MiB.
         */
        public Builder readBudgetBytes(int readBudgetBytes) {
            if (readBudgetBytes < 4096 || readBudgetBytes > 1 << 20) {
                throw new IllegalArgumentException("notify read budget " + readBudgetBytes
                        + " bytes is out of range; use 4096 to 1048576 (the default is " + DEFAULT_READ_BUDGET_BYTES
                        + ")");
            }
            return with(b -> b.readBudgetBytes = readBudgetBytes);
        }

        /**
         * The most bytes per second the server reads in reads larger than one notification (4 KiB), over all its
         * connections; a connection whose large read finds the rate spent waits, and its sender with it, while small
         * reads pass at once. Default 16 MiB/s; 1 MiB/s to 64 GiB/s.
         */
        public Builder bulkBytesPerSecond(long bulkBytesPerSecond) {
            if (bulkBytesPerSecond < 1L << 20 || bulkBytesPerSecond > 64L << 30) {
                throw new IllegalArgumentException("notify bulk rate " + bulkBytesPerSecond + " bytes per second is"
                        + " out of range; use 1 MiB/s to 64 GiB/s (the default is 16 MiB/s)");
            }
            return with(b -> b.bulkBytesPerSecond = bulkBytesPerSecond);
        }

        /** The period of the rate limit on warnings about rejected frames. Default 10 s. */
        public Builder warnPeriod(Duration warnPeriod) {
            Duration checked = positive(warnPeriod, "warning period");
            return with(b -> b.warnPeriod = checked);
        }

        /** Where received messages, refused frames and connections are reported; default {@link NotifyRecorder#NOOP}. */
        public Builder recorder(NotifyRecorder recorder) {
            Objects.requireNonNull(recorder, "recorder");
            return with(b -> b.recorder = recorder);
        }

        /** Receives every decoded message, on the connection's event loop; must not block. */
        public Builder handler(Consumer<NotifyMessage> handler) {
            Objects.requireNonNull(handler, "handler");
            return with(b -> b.handler = handler);
        }

        /**
         * Emits the server once it listens; errors with an {@link IllegalStateException} saying why if the
         * address cannot be bound (in use, not an address of this host, needs privileges).
         *
         * @throws NullPointerException at once if no handler is set
         */
        public Mono<NotifyServer> bind() {
            Objects.requireNonNull(handler, "set a handler before binding the notify server");
            return Mono.defer(() -> {
                Connections guard = new Connections(handler, recorder, maxFrameBytes, maxConnections,
                        maxBufferedBytes, frameReadTimeout, idleTimeout, decoder(auth, accepted),
                        bulkBudget(),
                        new RateLimitedLog(LOG, warnPeriod, null));
                // one read of at most the budget per turn: the allocator's buffers grow to it, never past
                var reads = new AdaptiveRecvByteBufAllocator(64, Math.min(2048, readBudgetBytes), readBudgetBytes);
                reads.maxMessagesPerRead(1);
                return TcpServer.create()
                        .runOn(loops != null ? loops : LOOPS)
                        .childOption(ChannelOption.RECVBUF_ALLOCATOR, reads)
                        .host(host)
                        .port(port)
                        .doOnConnection(guard::accepted)
                        .handle(guard::serve)
                        .bind()
                        .map(server -> new NotifyServer(server, guard))
                        .doOnError(e -> guard.warnings.close())
                        .onErrorMap(e -> new IllegalStateException("cannot listen for notifications on " + host
                                + ":" + port + ": " + BindFailures.describe(host, port, e), e));
            });
        }

        /**
         * Binds and waits up to 10 s for the server to listen. Blocks the calling thread: not for a Reactor
         * non-blocking thread (an event loop, {@code Schedulers.parallel()}).
         *
         * @throws IllegalStateException if the address cannot be bound, or binding takes longer than 10 s
         */
        public NotifyServer bindNow() {
            return Objects.requireNonNull(bind().block(BIND_WITHIN), "the notify server did not bind");
        }

        /**
         * This server's bulk rate, with its most wait per read: a frame of the largest size, read a budget at a time
         * and waiting the most before every read, still arrives within half the frame read timeout.
         */
        private BulkThrottle.Budget bulkBudget() {
            long reads = Math.max(1, Math.ceilDiv(maxFrameBytes + (long) Frames.PREFIX, readBudgetBytes));
            return new BulkThrottle.Budget(bulkBytesPerSecond, Math.max(maxFrameBytes, readBudgetBytes),
                    Math.max(1, frameReadTimeout.toNanos() / (2 * reads)), System::nanoTime);
        }

        private static Function<ByteBuffer, NotifyMessage> decoder(NotifyAuth auth, Set<NotifyMessage.Type> accepted) {
            if (auth != null) {
                return payload -> auth.verify(payload, accepted);
            }
            return payload -> NotifyCodec.decode(payload, payload.position(), payload.remaining(), accepted);
        }

        private static Duration positive(Duration value, String what) {
            Objects.requireNonNull(value, what);
            if (value.isZero() || value.isNegative()) {
                throw new IllegalArgumentException("notify " + what + " must be positive, got "
                        + DurationText.of(value));
            }
            return value;
        }
    }

    /** One bound server's connection handling: the cap, the frame pipeline, and what a bad frame does. */
    private record Connections(Consumer<NotifyMessage> handler, NotifyRecorder recorder, int maxFrameBytes,
            int maxConnections, long maxBufferedBytes, Duration frameReadTimeout, Duration idleTimeout,
            Function<ByteBuffer, NotifyMessage> decoder, BulkThrottle.Budget bulk, RateLimitedLog warnings,
            ChannelGroup group, AtomicInteger open, AtomicLong buffered, AtomicBoolean warnedHandlerFailure,
            AtomicLong handlerFailures, AtomicBoolean closed) {

        Connections(Consumer<NotifyMessage> handler, NotifyRecorder recorder, int maxFrameBytes, int maxConnections,
                long maxBufferedBytes, Duration frameReadTimeout, Duration idleTimeout,
                Function<ByteBuffer, NotifyMessage> decoder, BulkThrottle.Budget bulk, RateLimitedLog warnings) {
            this(handler, recorder, maxFrameBytes, maxConnections, maxBufferedBytes, frameReadTimeout, idleTimeout,
                    decoder, bulk, warnings, new DefaultChannelGroup(GlobalEventExecutor.INSTANCE), new AtomicInteger(),
                    new AtomicLong(), new AtomicBoolean(), new AtomicLong(), new AtomicBoolean());
        }

        void accepted(reactor.netty.Connection connection) {
            if (open.incrementAndGet() > maxConnections) {
                open.decrementAndGet();
                recorder.record(NotifyEvent.CLOSED_MAX_CONNECTIONS);
                warnings.warn(RateLimitedLog.Kind.REJECTED_CONNECTION, "closing a new notify connection: "
                        + maxConnections + " are open, the maximum");
                connection.channel().close();
                return;
            }
            connection.channel().closeFuture().addListener(f -> open.decrementAndGet());
            recorder.record(NotifyEvent.CONNECTION_ACCEPTED);
            group.add(connection.channel());
            // accepted while closing: it would outlive close() and ack for the closed side (added first, then checked)
            if (closed.get()) {
                connection.channel().close();
                return;
            }
            // ahead of the frames, so that it also holds back the reads their decoder asks for
            connection.addHandlerLast("kvflux-bulk", new BulkThrottle(bulk, recorder));
            connection.addHandlerLast("kvflux-frames",
                    Frames.guardedDecoder(maxFrameBytes, frameReadTimeout, idleTimeout, recorder, buffered,
                            maxBufferedBytes));
        }

        Mono<Void> serve(NettyInbound in, NettyOutbound out) {
            var acks = in.receive().map(frame -> Frames.frame(out.alloc(), NotifyCodec.encodeAck(handle(frame))))
                    .onErrorResume(error -> {
                        rejected(error);
                        return Mono.empty();
                    });
            return out.send(acks, buf -> true).then();
        }

        /**
         * Decodes and hands on one frame; returns the transfer id to acknowledge. Whatever goes wrong while decoding
         * leaves as a {@link RuntimeException}, so that no {@link Error} unwinds into the event loop.
         */
        private String handle(ByteBuf frame) {
            NotifyMessage message;
            try {
                // read in place: the frame's bytes are never copied whole, only each string field's
                message = decoder.apply(frame.nioBuffer());
            } catch (MalformedFrameException | UnauthenticatedFrameException e) {
                throw e;
            } catch (Throwable e) {
                throw new FrameFailedException(e);
            }
            recorder.record(NotifyEvent.RECEIVED);
            try (LogContext.Scope _ = LogContext.open(message.transferId(), null)) {
                try {
                    handler.accept(message);
                } catch (Throwable e) {
                    handlerFailed(message, e);
                }
            }
            return message.transferId();
        }

        private void rejected(Throwable error) {
            if (Frames.isBadLength(error)) {
                recorder.record(NotifyEvent.REJECTED_OVERSIZED);
                warnings.warn(RateLimitedLog.Kind.OVERSIZED, "closing a notify connection: frame length rejected ("
                        + LogText.escape(error.getMessage()) + "); the maximum is " + maxFrameBytes + " bytes");
            } else if (error instanceof UnauthenticatedFrameException) {
                recorder.record(NotifyEvent.REJECTED_UNAUTHENTICATED);
                warnings.warn(RateLimitedLog.Kind.UNAUTHENTICATED, "closing a notify connection: "
                        + error.getMessage());
            } else if (error instanceof MalformedFrameException malformed && malformed.isInvalidUtf8()) {
                recorder.record(NotifyEvent.REJECTED_INVALID_UTF8);
                warnings.warn(RateLimitedLog.Kind.INVALID_UTF8, "closing a notify connection: "
                        + error.getMessage());
            } else if (error instanceof MalformedFrameException) {
                recorder.record(NotifyEvent.REJECTED_MALFORMED);
                warnings.warn(RateLimitedLog.Kind.MALFORMED, "closing a notify connection: " + error.getMessage());
            } else {
                Throwable cause = error instanceof FrameFailedException ? error.getCause() : error;
                recorder.record(NotifyEvent.REJECTED_INTERNAL_ERROR);
                warnings.warn(RateLimitedLog.Kind.INTERNAL_ERROR, "closing a notify connection after an internal"
                        + " error: " + LogText.escape(cause.toString()));
            }
        }

        /**
         * Counts a handler failure; logs the server's first at error with what to do and later ones at debug, so a
         * handler that fails on every message cannot flood the log at the message rate.
         */
        private void handlerFailed(NotifyMessage message, Throwable error) {
            recorder.record(NotifyEvent.HANDLER_FAILED);
            long failures = handlerFailures.incrementAndGet();
            String what = LogText.escape(message.toString());
            if (warnedHandlerFailure.compareAndSet(false, true)) {
                String text = "notify handler failed on {}: the message was acknowledged but not acted on, and the"
                        + " connection stays open. This is a bug in the handler; report it with this log."
                        + " Later handler failures are counted (NotifyEvent.HANDLER_FAILED) and logged at debug"
                        + " level";
                if (error instanceof Error) {
                    // an Error's trace (a stack overflow's above all) is too long for a log; its name is enough
                    LOG.error(text + ": {}", what, error.toString());
                } else {
                    LOG.error(text, what, error);
                }
            } else {
                LOG.debug("notify handler failed on {} (failure {}): {}", what, failures,
                        error.toString());
            }
        }
    }

    /** An error other than a rejected frame while decoding one, carried as a {@link RuntimeException}. */
    private static final class FrameFailedException extends RuntimeException {
        FrameFailedException(Throwable cause) {
            super(cause.toString(), cause, false, false);
        }
    }
}
