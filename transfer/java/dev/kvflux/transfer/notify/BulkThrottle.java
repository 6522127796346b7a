package dev.kvflux.transfer.notify;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * Holds one notify server's bulk ingress to a rate. Notifications are small: a {@code write_done} is about a
 * hundred bytes, a block list of a long prompt tens of kilobytes. A peer streaming large frames, whether a
 * hostile one or a burst of block lists, would otherwise keep the server's event loops busy reading and
 * decoding at whatever rate the network gives, and every acknowledgement on those loops, and every thread of
 * the process on a small host, would wait behind it.
 *
 * <p>Every read of a connection is charged to one {@link Budget} per server. A read larger than
 * {@link #SMALL_READ_BYTES} that finds the budget spent stops its connection's reads ({@code autoRead} off,
 * and any read asked for meanwhile held back) until the budget has room again, so the kernel's buffers fill
 * and the sender's writes wait: the bytes it can make the server handle, and the CPU they cost, are bounded by
 * the rate. A small read never waits, so a peer sending notifications one at a time is served at once while
 * others stream.
 *
 * <p>No read waits longer than the budget's most wait, so that a frame of the largest size still arrives within
 * its frame read timeout however many connections stream at once: past the number of connections whose floor
 * (one read per most wait) adds up to the rate, the floor, not the rate, bounds what they get. Reads turned off
 * by another handler (Reactor Netty's backpressure) before a pause are not turned on by its end; a read asked
 * for during a pause is passed on when it ends.
 */
final class BulkThrottle extends ChannelDuplexHandler {
    /** Reads up to this size are never held back: single notifications and acknowledgements. */
    static final int SMALL_READ_BYTES = 4096;

    private final Budget budget;
    private final NotifyRecorder recorder;
    private ScheduledFuture<?> resume;
    private long resumeAtNanos;
    /** Whether this pause turned the channel's reads off (they were on when it began). */
    private boolean turnedOff;
    /** Whether a read was asked for during this pause. */
    private boolean heldRead;

    BulkThrottle(Budget budget, NotifyRecorder recorder) {
        this.budget = budget;
        this.recorder = recorder;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
        if (msg instanceof ByteBuf bytes) {
            int size = bytes.readableBytes();
            long now = budget.clock.getAsLong();
            long waitNanos = budget.charge(size, now);
            if (waitNanos > 0 && size > SMALL_READ_BYTES) {
                pause(ctx, now + waitNanos);
            }
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void read(ChannelHandlerContext ctx) {
        if (resume == null) {
            ctx.read();
        } else {
            heldRead = true;
        }
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (resume != null) {
            resume.cancel(false);
            resume = null;
        }
    }

    /** Stops reads until {@code atNanos}; a later pause of a paused connection moves its resumption later. */
    private void pause(ChannelHandlerContext ctx, long atNanos) {
        boolean starting = resume == null;
        if (starting) {
            turnedOff = false;
            heldRead = false;
            recorder.record(NotifyEvent.READS_THROTTLED);
        }
        var config = ctx.channel().config();
        if (config.isAutoRead()) {
            // on at the start of a pause, or turned back on by another handler during one
            config.setAutoRead(false);
            turnedOff = true;
        }
        if (!starting) {
            if (atNanos - resumeAtNanos <= 0) {
                return;
            }
            resume.cancel(false);
        }
        resumeAtNanos = atNanos;
        resume = ctx.executor().schedule(() -> resume(ctx), Math.max(0, atNanos - budget.clock.getAsLong()),
                TimeUnit.NANOSECONDS);
    }

    private void resume(ChannelHandlerContext ctx) {
        resume = null;
        if (!ctx.channel().isOpen()) {
            return;
        }
        var config = ctx.channel().config();
        if (turnedOff && !config.isAutoRead()) {
            // turning reads on asks for one, which passes read() now that resume is cleared
            config.setAutoRead(true);
        } else if (heldRead || config.isAutoRead()) {
            // a read asked for meanwhile, or reads turned on meanwhile (that asked for one, held here)
            ctx.read();
        }
    }

    /**
     * One server's bulk rate, shared by its connections: a generic cell-rate schedule, where each read moves
     * the time at which the budget is next free by its size over the rate, and a read waits by how far that time
     * runs ahead of now beyond one burst. Thread-safe: the server's connections live on several event loops.
     */
    static final class Budget {
        private final double nanosPerByte;
        private final long burstNanos;
        private final long maxWaitNanos;
        private final AtomicLong freeAtNanos;
        private final LongSupplier clock;

        /**
         * @param bytesPerSecond the sustained rate
         * @param burstBytes what may pass at once after a quiet spell
         * @param maxWaitNanos the longest one read waits; the schedule runs at most this far ahead of a burst
         * @param clock {@link System#nanoTime} but in tests
         */
        Budget(long bytesPerSecond, long burstBytes, long maxWaitNanos, LongSupplier clock) {
            if (bytesPerSecond < 1 || burstBytes < 1 || maxWaitNanos < 1) {
                throw new IllegalArgumentException("a bulk budget needs a positive rate, burst and most wait, got "
                        + bytesPerSecond + " B/s, " + burstBytes + " B and " + maxWaitNanos + " ns");
            }
            this.nanosPerByte = 1e9 / bytesPerSecond;
            this.burstNanos = (long) (burstBytes * nanosPerByte);
            this.maxWaitNanos = maxWaitNanos;
            this.clock = clock;
            this.freeAtNanos = new AtomicLong(clock.getAsLong());
        }

        /**
         * Charges {@code bytes} read at {@code now}; returns how long the reader should wait, 0 for not at all, and
         * at most the most wait. The schedule never runs further ahead than one burst and the most wait, so the
         * debt of an attack that has ended does not hold back the reads after it.
         */
        long charge(long bytes, long now) {
            long cost = (long) (bytes * nanosPerByte);
            long limit = now + burstNanos + maxWaitNanos;
            while (true) {
                long free = freeAtNanos.get();
                long next = Math.min(Math.max(free, now) + cost, limit);
                if (freeAtNanos.compareAndSet(free, next)) {
                    return Math.max(0, next - now - burstNanos);
                }
            }
        }
    }
}
