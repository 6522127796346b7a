package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.ExpectedTransfers;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The notify server's bulk rate: what a peer streaming large frames gets, and what a small one keeps. */
class BulkThrottleTest {
    private static final long MIB = 1 << 20;
    private static final long SECOND = Duration.ofSeconds(1).toNanos();

    /** Counts the reads that reach the channel, from a handler put before (nearer the socket than) the throttle. */
    private static AtomicInteger countReads(EmbeddedChannel channel) {
        AtomicInteger reads = new AtomicInteger();
        channel.pipeline().addLast(new ChannelOutboundHandlerAdapter() {
            @Override
            public void read(ChannelHandlerContext ctx) {
                reads.incrementAndGet();
                ctx.read();
            }
        });
        return reads;
    }

    /** Moves the channel's event loop and the budget's clock on together, and runs what became due. */
    private static void advance(EmbeddedChannel channel, AtomicLong clock, Duration by) {
        channel.advanceTimeBy(by.toNanos(), TimeUnit.NANOSECONDS);
        clock.addAndGet(by.toNanos());
        channel.runScheduledPendingTasks();
    }

    @Test
    void aBudgetLetsOneBurstPassAtOnceAndMakesTheRestWaitByItsSizeOverTheRate() {
        AtomicLong now = new AtomicLong(1_000_000_000L);
        BulkThrottle.Budget budget = new BulkThrottle.Budget(MIB, MIB / 2, SECOND, now::get);
        assertThat(budget.charge(MIB / 2, now.get())).as("one burst").isZero();
        // the next quarter MiB is a quarter second beyond the burst
        assertThat(budget.charge(MIB / 4, now.get())).isEqualTo(250_000_000L);
        // two readers share the schedule: the second waits behind the first's bytes too
        assertThat(budget.charge(MIB / 4, now.get())).isEqualTo(500_000_000L);
        now.addAndGet(Duration.ofSeconds(10).toNanos());
        assertThat(budget.charge(MIB / 2, now.get())).as("a quiet spell gives the burst back, no more").isZero();
        assertThat(budget.charge(1024, now.get())).isPositive();
    }

    @Test
    void noReadWaitsLongerThanTheMostWaitAndTheDebtOfAnAttackDoesNotOutliveIt() {
        AtomicLong now = new AtomicLong();
        BulkThrottle.Budget budget = new BulkThrottle.Budget(MIB, 64 << 10, 100_000_000L, now::get);
        for (int i = 0; i < 1000; i++) {
            assertThat(budget.charge(MIB, now.get())).isLessThanOrEqualTo(100_000_000L);
        }
        assertThat(budget.charge(MIB, now.get())).isEqualTo(100_000_000L);
        // 1,000 MiB were read at 1 MiB/s, but once the most wait has passed the budget is as after a quiet spell
        now.addAndGet(100_000_000L + 62_500_000L);
        assertThat(budget.charge(64 << 10, now.get())).isZero();
    }

    @Test
    void aBudgetWithoutRateOrBurstIsRefused() {
        assertThatIllegalArgumentException().isThrownBy(() -> new BulkThrottle.Budget(0, 1, 1, System::nanoTime))
                .withMessageContaining("positive rate");
    }

    @Test
    void aLargeReadThatFindsTheBudgetSpentStopsItsConnectionsReadsUntilTheBudgetHasRoom() {
        EmbeddedChannel channel = new EmbeddedChannel();
        channel.freezeTime();
        AtomicLong clock = new AtomicLong();
        MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        AtomicInteger readsAsked = countReads(channel);
        channel.pipeline().addLast(new BulkThrottle(new BulkThrottle.Budget(MIB, 64 << 10, SECOND, clock::get), counts));

        channel.writeInbound(Unpooled.wrappedBuffer(new byte[64 << 10]));
        assertThat(channel.config().isAutoRead()).as("within the burst").isTrue();
        channel.writeInbound(Unpooled.wrappedBuffer(new byte[64 << 10]));
        assertThat(channel.config().isAutoRead()).as("past the burst by 64 KiB, 62.5 ms at 1 MiB/s").isFalse();
        assertThat(counts.count(NotifyEvent.READS_THROTTLED)).isEqualTo(1);
        int asked = readsAsked.get();
        channel.read();
        assertThat(readsAsked.get()).as("a read asked for while paused is held back").isEqualTo(asked);

        advance(channel, clock, Duration.ofMillis(62));
        assertThat(channel.config().isAutoRead()).as("not yet").isFalse();
        advance(channel, clock, Duration.ofMillis(1));
        assertThat(channel.config().isAutoRead()).isTrue();
        assertThat(readsAsked.get()).as("resuming asks for a read").isGreaterThan(asked);
        assertThat(channel.inboundMessages()).as("every read byte was passed on").hasSize(2);
        channel.finishAndReleaseAll();
    }

    @Test
    void readsTurnedBackOnByAnotherHandlerDuringAPauseAreAskedForWhenItEnds() {
        EmbeddedChannel channel = new EmbeddedChannel();
        channel.freezeTime();
        AtomicLong clock = new AtomicLong();
        AtomicInteger readsAsked = countReads(channel);
        BulkThrottle.Budget budget = new BulkThrottle.Budget(MIB, 64 << 10, SECOND, clock::get);
        budget.charge(MIB, 0);
        channel.pipeline().addLast(new BulkThrottle(budget, NotifyRecorder.NOOP));
        channel.writeInbound(Unpooled.wrappedBuffer(new byte[8192]));
        assertThat(channel.config().isAutoRead()).isFalse();
        // as Reactor Netty does when demand comes back: reads on, and the read that asks for is held here
        channel.config().setAutoRead(true);
        int asked = readsAsked.get();

        advance(channel, clock, Duration.ofSeconds(2));
        assertThat(channel.config().isAutoRead()).isTrue();
        assertThat(readsAsked.get()).as("the held read is passed on, or the connection would never read again")
                .isGreaterThan(asked);
        channel.finishAndReleaseAll();
    }

    @Test
    void readsAnotherHandlerHadTurnedOffStayOffWhenAPauseEnds() {
        EmbeddedChannel channel = new EmbeddedChannel();
        channel.freezeTime();
        AtomicLong clock = new AtomicLong();
        BulkThrottle.Budget budget = new BulkThrottle.Budget(MIB, 64 << 10, SECOND, clock::get);
        budget.charge(MIB, 0);
        channel.pipeline().addLast(new BulkThrottle(budget, NotifyRecorder.NOOP));
        // Reactor Netty's backpressure: no demand, reads off, before the large read that pauses
        channel.config().setAutoRead(false);
        channel.writeInbound(Unpooled.wrappedBuffer(new byte[8192]));

        advance(channel, clock, Duration.ofSeconds(2));
        assertThat(channel.config().isAutoRead()).as("the pause's end does not override the backpressure").isFalse();
        channel.finishAndReleaseAll();
    }

    @Test
    void aSmallReadNeverWaitsEvenWhenTheBudgetIsSpent() {
        EmbeddedChannel channel = new EmbeddedChannel();
        AtomicLong clock = new AtomicLong();
        BulkThrottle.Budget budget = new BulkThrottle.Budget(MIB, 64 << 10, SECOND, clock::get);
        budget.charge(16 * MIB, 0);
        MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        channel.pipeline().addLast(new BulkThrottle(budget, counts));

        for (int i = 0; i < 100; i++) {
            channel.writeInbound(Unpooled.wrappedBuffer(new byte[BulkThrottle.SMALL_READ_BYTES]));
        }
        assertThat(channel.config().isAutoRead()).isTrue();
        assertThat(counts.count(NotifyEvent.READS_THROTTLED)).isZero();
        channel.finishAndReleaseAll();
    }

    /**
     * Over loopback: a peer streams 32 MiB of large frames, without waiting for their acknowledgements, to a
     * server held to 1 MiB/s, while a client sends notifications one at a time. The notifications are all
     * acknowledged while the stream is held back, and the stream gets no more acknowledged than the rate allows
     * for the time it took (an upper bound, so a slow machine cannot fail it).
     */
    @Test
    void aPeerStreamingLargeFramesIsHeldToTheRateWhileNotificationsPassBesideIt() throws Exception {
        MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline();
        int frameBytes = 512 << 10;
        int frames = 64;
        try (NotifyServer server = NotifyServer.builder().port(0).recorder(counts).handler(registry)
                .bulkBytesPerSecond(MIB).bindNow();
                NotifyClient client = NotifyClient.builder().build();
                Socket bulk = new Socket("127.0.0.1", server.address().getPort())) {
            byte[] payload = NotifyCodec.encode(new NotifyMessage.WriteFailed("bulk",
                    dev.kvflux.bindings.StatusCode.ERR_RDMA_OP, "z".repeat(frameBytes - 96)));
            byte[] frame = ByteBuffer.allocate(4 + payload.length).putInt(payload.length).put(payload).array();
            long start = System.nanoTime();
            Thread writer = Thread.ofPlatform().daemon().start(() -> {
                try {
                    OutputStream out = bulk.getOutputStream();
                    for (int i = 0; i < frames; i++) {
                        out.write(frame);
                    }
                } catch (java.io.IOException closed) {
                    // the test ends by closing the socket
                }
            });
            DataInputStream acks = new DataInputStream(bulk.getInputStream());
            bulk.setSoTimeout(30_000);
            acks.readNBytes(acks.readInt());
            for (int i = 0; i < 20; i++) {
                assertThat(client.send(server.address(), new NotifyMessage.WriteDone("small-" + i),
                        Duration.ofSeconds(5)).block(Duration.ofSeconds(10))).isTrue();
            }
            // the throttle engages once the writer is past the burst; on a loaded host its thread may not have got
            // that far while the small notifications went through, so wait for it (the rate bound below takes the
            // time waited into account)
            long until = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (counts.count(NotifyEvent.READS_THROTTLED) == 0 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            int bulkAcked = 1;
            while (bulkAcked < frames && bulk.getInputStream().available() > 0) {
                acks.readNBytes(acks.readInt());
                bulkAcked++;
            }
            // 1 MiB of burst, then 1 MiB/s; each frame is half a MiB, and up to one read budget may be in flight
            double allowedFrames = (MIB + MIB * seconds + NotifyServer.DEFAULT_READ_BUDGET_BYTES) / frame.length;
            assertThat(bulkAcked).as("bulk frames acknowledged within %.2f s", seconds)
                    .isLessThanOrEqualTo((int) Math.floor(allowedFrames)).isLessThan(frames);
            assertThat(counts.count(NotifyEvent.READS_THROTTLED)).isPositive();
            writer.interrupt();
        }
    }
}
