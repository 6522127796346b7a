package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.ExpectedTransfers;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import reactor.core.publisher.Mono;

/** What the notify server bounds for a hostile peer, over loopback: frames, errors, connections, time, logs. */
class NotifyServerLimitsTest {
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final NotifyAuth SECRET = NotifyAuth.of("limits-test-secret-0123456789abcdef");

    private final List<AutoCloseable> open = new ArrayList<>();
    private final MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
    private final MicrometerNotifyRecorder clientCounts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private NotifyServer server(NotifyServer.Builder builder, ExpectedTransfers registry) {
        NotifyServer server = builder.port(0).recorder(counts).handler(registry).bindNow();
        open.add(server);
        return server;
    }

    private NotifyClient client(NotifyAuth auth) {
        NotifyClient client = NotifyClient.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50)).auth(auth)
                .recorder(clientCounts)
                .build();
        open.add(client);
        return client;
    }

    /**
     * Sends {@code payload} as one frame on a fresh connection and returns once the server closed it (an end
     * of stream, or a reset when it closed while bytes were still coming).
     */
    private static void sendAndExpectClose(NotifyServer server, byte[] payload) throws IOException {
        try (Socket bad = new Socket("127.0.0.1", server.address().getPort())) {
            bad.setSoTimeout(5000);
            try {
                bad.getOutputStream().write(ByteBuffer.allocate(4 + payload.length).putInt(payload.length)
                        .put(payload).array());
                assertThat(bad.getInputStream().read()).as("the server closes the connection").isEqualTo(-1);
            } catch (java.net.SocketException reset) {
                assertThat(reset.getMessage()).contains("reset");
            }
        }
    }

    /** A good client still gets a message through and the registry settles it. */
    private void assertStillServes(NotifyServer server, ExpectedTransfers registry, NotifyAuth auth, String id) {
        Mono<Void> expected = registry.expect(id).cache();
        expected.subscribe(v -> { }, e -> { });
        assertThat(client(auth).send(server.address(), new NotifyMessage.WriteDone(id), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
    }

    @Test
    void nineByteMap32FrameClosesItsConnectionAndIsCountedMalformed() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder(), registry);

        sendAndExpectClose(server, new byte[] {(byte) 0xdf, 0x40, 0, 0, 0, (byte) 0xa1, 'a', (byte) 0xa1, 'b'});

        assertThat(counts.count(NotifyEvent.REJECTED_MALFORMED)).isEqualTo(1);
        assertStillServes(server, registry, null, "after");
    }

    @Test
    void messageOfATypeTheServerDoesNotTakeClosesItsConnectionAndIsCountedMalformed() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder().accepts(NotifyMessage.Type.WRITE_DONE, NotifyMessage.Type.WRITE_FAILED), registry);

        sendAndExpectClose(server, NotifyCodec.encode(new NotifyMessage.Release("t-1")));

        assertThat(counts.count(NotifyEvent.REJECTED_MALFORMED)).isEqualTo(1);
        assertThat(counts.count(NotifyEvent.RECEIVED)).isZero();
        assertStillServes(server, registry, null, "after");
    }

    @Test
    void invalidUtf8ClosesItsConnectionAndIsCountedAsSuch() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder(), registry);
        byte[] frame = NotifyCodec.encode(new NotifyMessage.WriteDone("t-\u00e9"));
        frame[frame.length - 1] = (byte) 0xff;

        sendAndExpectClose(server, frame);

        assertThat(counts.count(NotifyEvent.REJECTED_INVALID_UTF8)).isEqualTo(1);
        assertThat(counts.count(NotifyEvent.REJECTED_MALFORMED)).isZero();
    }

    @Test
    void withASecretAHostileFrameIsRejectedByItsTagBeforeAnyDecoding() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder().auth(SECRET), registry);
        byte[] hostile = new byte[64];
        hostile[0] = (byte) 0xdf;
        hostile[1] = 0x40;

        sendAndExpectClose(server, hostile);
        sendAndExpectClose(server, new byte[] {(byte) 0xdf, 0x40, 0, 0, 0, (byte) 0xa1, 'a', (byte) 0xa1, 'b'});

        assertThat(counts.count(NotifyEvent.REJECTED_UNAUTHENTICATED)).isEqualTo(2);
        assertThat(counts.count(NotifyEvent.REJECTED_MALFORMED)).as("nothing was decoded").isZero();
        assertStillServes(server, registry, SECRET, "after");
    }

    @Test
    void errorWhileDecodingAFrameClosesItsConnectionIsCountedAndTheServerKeepsServing() throws IOException {
        // the receiver's clock overflows the stack once, in the middle of checking a correctly signed frame
        java.util.concurrent.atomic.AtomicBoolean thrown = new java.util.concurrent.atomic.AtomicBoolean();
        reactor.core.scheduler.Scheduler clock = new reactor.core.scheduler.Scheduler() {
            @Override
            public long now(java.util.concurrent.TimeUnit unit) {
                if (thrown.compareAndSet(false, true)) {
                    throw new StackOverflowError("clock recursed");
                }
                return reactor.core.scheduler.Schedulers.parallel().now(unit);
            }

            @Override
            public reactor.core.Disposable schedule(Runnable task) {
                return reactor.core.scheduler.Schedulers.parallel().schedule(task);
            }

            @Override
            public Worker createWorker() {
                return reactor.core.scheduler.Schedulers.parallel().createWorker();
            }
        };
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder().auth(SECRET.clock(clock)), registry);

        sendAndExpectClose(server, SECRET.sign(new NotifyMessage.WriteDone("t-overflow")));

        assertThat(counts.count(NotifyEvent.REJECTED_INTERNAL_ERROR)).isEqualTo(1);
        assertThat(counts.count(NotifyEvent.RECEIVED)).isZero();
        assertStillServes(server, registry, SECRET, "after");
    }

    @Test
    void errorThrownByTheHandlerIsCountedAndTheMessageStillAcknowledged() {
        MicrometerNotifyRecorder metrics = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        NotifyServer server = NotifyServer.builder().port(0).recorder(metrics).handler(message -> {
            if (message.transferId().startsWith("overflow")) {
                throw new StackOverflowError("handler recursed");
            }
            throw new OutOfMemoryError("handler ran out");
        }).bindNow();
        open.add(server);
        NotifyClient client = client(null);

        for (String id : List.of("overflow-1", "oom-1", "overflow-2")) {
            assertThat(client.send(server.address(), new NotifyMessage.WriteDone(id), WAIT).block(WAIT)).isTrue();
        }

        assertThat(metrics.count(NotifyEvent.HANDLER_FAILED)).isEqualTo(3);
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("the connection stayed open").isEqualTo(1);
    }

    @Test
    void payloadOfExactlyTheMaximumIsAcceptedAndOneByteMoreIsNot() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder(), registry);
        int max = Frames.DEFAULT_MAX_FRAME_BYTES;
        byte[] exact = writeFailedOfSize("t-max", max);
        assertThat(exact).hasSize(max);
        Mono<Void> expected = registry.expect("t-max").cache();
        expected.subscribe(v -> { }, e -> { });

        try (Socket socket = new Socket("127.0.0.1", server.address().getPort())) {
            socket.setSoTimeout(5000);
            socket.getOutputStream().write(ByteBuffer.allocate(4 + max).putInt(max).put(exact).array());
            InputStream in = socket.getInputStream();
            assertThat(in.readNBytes(4)).as("an acknowledgement comes back").hasSize(4);
        }
        assertThat(counts.count(NotifyEvent.NOTICE_WRITE_FAILED) + counts.count(NotifyEvent.RECEIVED)).isPositive();

        sendAndExpectClose(server, writeFailedOfSize("t-over", max + 1));
        assertThat(counts.count(NotifyEvent.REJECTED_OVERSIZED)).isEqualTo(1);
    }

    /** A write_failed payload of exactly {@code size} bytes, its reason padded to fit. */
    private static byte[] writeFailedOfSize(String id, int size) {
        int empty = NotifyCodec.encode(new NotifyMessage.WriteFailed(id, StatusCode.ERR_RDMA_OP, "")).length;
        // a str32 header (5 bytes) replaces the 1-byte fixstr header of the empty reason
        String reason = "r".repeat(size - empty - 4);
        return NotifyCodec.encode(new NotifyMessage.WriteFailed(id, StatusCode.ERR_RDMA_OP, reason));
    }

    @Test
    void connectionsBeyondTheCapAreClosedAtOnceAndCounted() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder().limits(new NotifyLimits(2,
                NotifyLimits.DEFAULTS.frameReadTimeout(), NotifyLimits.DEFAULTS.idleTimeout(),
                NotifyLimits.DEFAULTS.peerBudgetBytes())), registry);
        try (Socket first = new Socket("127.0.0.1", server.address().getPort());
                Socket second = new Socket("127.0.0.1", server.address().getPort())) {
            awaitTrue(() -> server.openConnections() == 2);
            try (Socket third = new Socket("127.0.0.1", server.address().getPort())) {
                third.setSoTimeout(5000);
                assertThat(third.getInputStream().read()).as("the third is closed").isEqualTo(-1);
            }
            assertThat(counts.count(NotifyEvent.CLOSED_MAX_CONNECTIONS)).isEqualTo(1);
        }
        awaitTrue(() -> server.openConnections() == 0);
        assertStillServes(server, registry, null, "after-cap");
    }

    @Test
    void frameThatDoesNotCompleteWithinTheReadTimeoutClosesItsConnection() throws IOException {
        // a length prefix announcing 100 bytes, then two of them: a sender trickling its frame
        MicrometerNotifyRecorder metrics = closedAfterSending(NotifyServer.builder().frameReadTimeout(Duration.ofMillis(200)),
                new byte[] {0, 0, 0, 100, (byte) 0x82, (byte) 0xa4});
        assertThat(metrics.count(NotifyEvent.CLOSED_FRAME_READ_TIMEOUT)).isEqualTo(1);
        assertThat(metrics.count(NotifyEvent.CLOSED_IDLE_TIMEOUT)).isZero();
    }

    @Test
    void silentConnectionIsClosedAfterTheIdleTimeout() throws IOException {
        MicrometerNotifyRecorder metrics = closedAfterSending(NotifyServer.builder().idleTimeout(Duration.ofMillis(200)),
                new byte[0]);
        assertThat(metrics.count(NotifyEvent.CLOSED_IDLE_TIMEOUT)).isEqualTo(1);
        assertThat(metrics.count(NotifyEvent.CLOSED_FRAME_READ_TIMEOUT)).isZero();
    }

    /** Connects to a server built from {@code builder}, sends {@code raw}, waits until the server closes. */
    private MicrometerNotifyRecorder closedAfterSending(NotifyServer.Builder builder, byte[] raw) throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(builder, registry);
        try (Socket socket = new Socket("127.0.0.1", server.address().getPort())) {
            socket.setSoTimeout(5000);
            socket.getOutputStream().write(raw);
            assertThat(socket.getInputStream().read()).as("the server closes the connection").isEqualTo(-1);
        }
        return counts;
    }

    @Test
    void pooledClientConnectionIsClosedAfterItsIdleLimit() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder(), registry);
        NotifyClient client = NotifyClient.builder().idleLimit(Duration.ofMillis(200)).recorder(clientCounts).build();
        open.add(client);

        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();
        awaitTrue(() -> clientCounts.count(NotifyEvent.CLIENT_CONNECTION_CLOSED_IDLE) == 1 && server.openConnections() == 0);

        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT))
                .as("the next send opens a fresh connection").isTrue();
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).isEqualTo(2);
    }

    @Test
    void rejectedFramesAreLoggedOncePerPeriodEscapedAndSummedUpAfter() throws Exception {
        var logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(NotifyServer.class);
        ListAppender<ILoggingEvent> appender = new ListAppender<>();
        appender.start();
        logger.addAppender(appender);
        try {
            ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
            NotifyServer server = server(NotifyServer.builder().warnPeriod(Duration.ofMinutes(5)), registry);
            byte[] forged;
            try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
                packer.packMapHeader(2).packString("type").packString("x\n12:00:00.000 ERROR forged\r")
                        .packString("transfer_id").packString("t");
                forged = packer.toByteArray();
            }
            for (int i = 0; i < 40; i++) {
                sendAndExpectClose(server, forged);
            }
            assertThat(counts.count(NotifyEvent.REJECTED_MALFORMED)).isEqualTo(40);

            server.close();

            List<String> warnings = appender.list.stream().filter(e -> e.getLevel() == Level.WARN)
                    .map(ILoggingEvent::getFormattedMessage).toList();
            assertThat(warnings).hasSize(2);
            assertThat(warnings.getFirst()).contains("x\\n12:00:00.000 ERROR forged\\r").doesNotContain("\n");
            assertThat(warnings.getLast()).contains("39").contains("malformed=39");
            assertThat(appender.list).allSatisfy(e -> assertThat(e.getThrowableProxy()).isNull());
        } finally {
            logger.detachAppender(appender);
        }
    }

    @Test
    void partlyReceivedFramesOverTheServersByteBudgetCloseTheConnectionThatWouldPassIt() throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = server(NotifyServer.builder().maxBufferedBytes(100_000), registry);
        byte[] part = new byte[60_000];

        try (Socket first = new Socket("127.0.0.1", server.address().getPort());
             Socket second = new Socket("127.0.0.1", server.address().getPort())) {
            second.setSoTimeout(5000);
            first.getOutputStream().write(ByteBuffer.allocate(4).putInt(1_000_000).array());
            first.getOutputStream().write(part);
            first.getOutputStream().flush();
            awaitTrue(() -> server.bufferedBytes() >= part.length);

            second.getOutputStream().write(ByteBuffer.allocate(4).putInt(1_000_000).array());
            second.getOutputStream().write(part);
            second.getOutputStream().flush();
            try {
                assertThat(second.getInputStream().read()).as("the second peer is cut off").isEqualTo(-1);
            } catch (java.net.SocketException reset) {
                assertThat(reset.getMessage()).contains("reset");
            }
            assertThat(counts.count(NotifyEvent.CLOSED_BUFFER_BUDGET)).isEqualTo(1);
            assertThat(server.bufferedBytes()).isBetween((long) part.length, 100_000L);
        }
        awaitTrue(() -> server.bufferedBytes() == 0);
        assertStillServes(server, registry, null, "t-after-budget");
    }

    private static void awaitTrue(BooleanSupplier condition) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime()).as("condition within %s", WAIT).isLessThan(deadline);
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    /**
     * A frame many times the read budget still arrives whole (over several turns of its loop), and the handler
     * runs on the notify servers' own event loops, not on those of the HTTP servers.
     */
    @Test
    void aFrameLargerThanTheReadBudgetArrivesWholeOnTheNotifyLoops() {
        List<NotifyMessage> received = new CopyOnWriteArrayList<>();
        List<String> threads = new CopyOnWriteArrayList<>();
        NotifyServer server = NotifyServer.builder().port(0).readBudgetBytes(4096).handler(m -> {
            threads.add(Thread.currentThread().getName());
            received.add(m);
        }).bindNow();
        open.add(server);
        List<Long> blocks = LongStream.range(1_000_000_000L, 1_000_000_000L + 60_000).boxed().toList();
        NotifyMessage big = new NotifyMessage.RemoteBlocks("r", "big", blocks, 0);
        assertThat(NotifyCodec.encode(big).length).as("the frame is at least 64 read budgets").isGreaterThan(64 * 4096);

        assertThat(client(null).send(server.address(), big, WAIT).block(WAIT)).isTrue();

        assertThat(received).containsExactly(big);
        assertThat(threads).allMatch(name -> name.startsWith("kvflux-notify"), "a notify loop thread");
    }

    @Test
    void aReadBudgetOutOfRangeIsRefusedWithTheRange() {
        assertThatIllegalArgumentException()
                .isThrownBy(() -> NotifyServer.builder().readBudgetBytes(100))
                .withMessageContaining("use 4096 to 1048576");
        assertThatIllegalArgumentException()
                .isThrownBy(() -> NotifyServer.builder().readBudgetBytes(2 << 20))
                .withMessageContaining("the default is 65536");
    }
}
