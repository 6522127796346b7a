package dev.kvflux.transfer.notify;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.CorruptedFrameException;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.TooLongFrameException;
import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The notify channel's framing: a 4-byte big-endian length, then that many bytes of msgpack. A length
 * that is negative or above the maximum fails at once, before any payload is buffered.
 */
final class Frames {
    /** Bytes of the length prefix. */
    static final int PREFIX = 4;
    /** The default maximum payload: ample for a remote_blocks list of tens of thousands of blocks. */
    static final int DEFAULT_MAX_FRAME_BYTES = 1 << 20;

    private Frames() {
    }

    /** A decoder that strips the prefix and fails fast on a bad length; payloads up to {@code maxFrameBytes} pass. */
    static LengthFieldBasedFrameDecoder decoder(int maxFrameBytes) {
        // the decoder's limit counts the prefix as well as the payload
        return new LengthFieldBasedFrameDecoder(maxFrameBytes + PREFIX, 0, PREFIX, 0, PREFIX, true);
    }

    /**
     * A server-side decoder that also closes its connection when a started frame is not complete within
     * {@code frameReadTimeout} (a peer trickling bytes), or when nothing arrives for {@code idleTimeout},
     * or when the bytes of partly received frames held by all of a server's connections, {@code buffered},
     * would pass {@code maxBufferedBytes} (many peers each sending most of a large frame), counting each in
     * {@code recorder}. Timers run on the connection's event loop.
     */
    static LengthFieldBasedFrameDecoder guardedDecoder(int maxFrameBytes, Duration frameReadTimeout,
            Duration idleTimeout, NotifyRecorder recorder, AtomicLong buffered, long maxBufferedBytes) {
        return new Guarded(maxFrameBytes + PREFIX, frameReadTimeout.toNanos(), idleTimeout.toNanos(), recorder,
                buffered, maxBufferedBytes);
    }

    /** One frame holding {@code payload}. */
    static ByteBuf frame(ByteBufAllocator alloc, byte[] payload) {
        ByteBuf buf = alloc.buffer(PREFIX + payload.length);
        buf.writeInt(payload.length);
        buf.writeBytes(payload);
        return buf;
    }

    /** Whether {@code error} is the decoder rejecting a length prefix. */
    static boolean isBadLength(Throwable error) {
        return error instanceof TooLongFrameException || error instanceof CorruptedFrameException;
    }

    static void checkMax(int maxFrameBytes) {
        if (maxFrameBytes < 16 || maxFrameBytes > (64 << 20)) {
            throw new IllegalArgumentException("max frame size " + maxFrameBytes
                    + " bytes is out of range; use 16 bytes to 64 MiB (the default is 1 MiB)");
        }
    }

    /**
     * The length-prefixed decoder with two deadlines checked by one timer: while part of a frame is buffered,
     * the frame must complete within the read timeout of its first byte; while none is, some byte must arrive
     * within the idle timeout of the last one. The timer fires at the nearer deadline and re-arms itself.
     */
    private static final class Guarded extends LengthFieldBasedFrameDecoder {
        private final long frameReadTimeoutNanos;
        private final long idleTimeoutNanos;
        private final NotifyRecorder recorder;
        private final AtomicLong buffered;
        private final long maxBufferedBytes;
        /** This connection's share of {@link #buffered}: the bytes of its partly received frame. */
        private long held;
        private long lastReadNanos;
        private long frameStartNanos = -1;
        private ScheduledFuture<?> timer;
        private long timerDueNanos;

        Guarded(int maxFrameLength, long frameReadTimeoutNanos, long idleTimeoutNanos, NotifyRecorder recorder,
                AtomicLong buffered, long maxBufferedBytes) {
            super(maxFrameLength, 0, PREFIX, 0, PREFIX, true);
            this.frameReadTimeoutNanos = frameReadTimeoutNanos;
            this.idleTimeoutNanos = idleTimeoutNanos;
            this.recorder = recorder;
            this.buffered = buffered;
            this.maxBufferedBytes = maxBufferedBytes;
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) throws Exception {
            super.handlerAdded(ctx);
            lastReadNanos = System.nanoTime();
            arm(ctx, lastReadNanos + idleTimeoutNanos);
        }

        @Override
        protected void handlerRemoved0(ChannelHandlerContext ctx) throws Exception {
            if (timer != null) {
                timer.cancel(false);
            }
            buffered.addAndGet(-held);
            held = 0;
            super.handlerRemoved0(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
            long now = System.nanoTime();
            lastReadNanos = now;
            super.channelRead(ctx, msg);
            if (!account(ctx)) {
                return;
            }
            if (actualReadableBytes() == 0) {
                frameStartNanos = -1;
            } else if (frameStartNanos < 0) {
                frameStartNanos = now;
                arm(ctx, now + frameReadTimeoutNanos);
            }
        }

        /**
         * Moves this connection's share of the server's buffered bytes to what it holds now; closes it, counted,
         * when that growth takes the server over its budget. Returns whether the connection stays open.
         */
        private boolean account(ChannelHandlerContext ctx) {
            long now = ctx.channel().isOpen() ? actualReadableBytes() : 0;
            long growth = now - held;
            held = now;
            if (growth != 0 && buffered.addAndGet(growth) > maxBufferedBytes && growth > 0) {
                recorder.record(NotifyEvent.CLOSED_BUFFER_BUDGET);
                buffered.addAndGet(-held);
                held = 0;
                ctx.close();
                return false;
            }
            return true;
        }

        /** Makes sure the timer fires no later than {@code dueNanos}. */
        private void arm(ChannelHandlerContext ctx, long dueNanos) {
            if (timer != null && !timer.isDone()) {
                if (timerDueNanos - dueNanos <= 0) {
                    return;
                }
                timer.cancel(false);
            }
            timerDueNanos = dueNanos;
            timer = ctx.executor().schedule(() -> check(ctx), Math.max(0, dueNanos - System.nanoTime()),
                    TimeUnit.NANOSECONDS);
        }

        private void check(ChannelHandlerContext ctx) {
            if (!ctx.channel().isOpen()) {
                return;
            }
            long now = System.nanoTime();
            boolean inFrame = frameStartNanos >= 0;
            long due = inFrame ? frameStartNanos + frameReadTimeoutNanos : lastReadNanos + idleTimeoutNanos;
            if (due - now > 0) {
                timer = null;
                arm(ctx, due);
                return;
            }
            recorder.record(inFrame ? NotifyEvent.CLOSED_FRAME_READ_TIMEOUT : NotifyEvent.CLOSED_IDLE_TIMEOUT);
            ctx.close();
        }
    }
}
