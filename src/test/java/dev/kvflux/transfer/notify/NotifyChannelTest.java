package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.ExpectedTransfers;
import dev.kvflux.transfer.ReceiveFailedException;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.Connection;
import reactor.netty.DisposableServer;
import reactor.netty.tcp.TcpClient;
import reactor.netty.tcp.TcpServer;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The notify channel over loopback: what reaches decode, and what a bad peer can and cannot break. */
class NotifyChannelTest {
    private static final Duration WAIT = Duration.ofSeconds(5);

    private final List<AutoCloseable> open = new ArrayList<>();
    private final MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
    private final MicrometerNotifyRecorder clientCounts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private static final NotifyAuth SECRET = NotifyAuth.of("a-test-secret-of-32-characters!!");

    private NotifyServer decode(ExpectedTransfers registry, int port) {
        return decode(registry, port, null);
    }

    private NotifyServer decode(ExpectedTransfers registry, int port, NotifyAuth auth) {
        NotifyServer server = NotifyServer.builder().port(port).maxFrameBytes(1024).auth(auth)
                .recorder(counts).handler(registry).bindNow();
        open.add(server);
        return server;
    }

    private NotifyClient client() {
        return client(null);
    }

    private NotifyClient client(NotifyAuth auth) {
        NotifyClient client = NotifyClient.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50))
                .auth(auth).recorder(clientCounts).build();
        open.add(client);
        return client;
    }

    @Test
    void writeDoneReachesDecode() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0);
        Mono<Void> expected = awaiting(registry, "t-1");

        assertThat(client().send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(counts.count(NotifyEvent.NOTICE_WRITE_DONE)).isEqualTo(1);
    }

    @Test
    void writeFailedReachesDecodeWithCodeAndReason() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0);
        Mono<Void> expected = awaiting(registry, "t-2");

        client().send(server.address(), new NotifyMessage.WriteFailed("t-2", StatusCode.IN_PROGRESS,
                "RDMA transfer timed out after 3s"), WAIT).block(WAIT);

        assertThatThrownBy(() -> expected.block(WAIT))
                .isInstanceOfSatisfying(ReceiveFailedException.class, e -> {
                    assertThat(e.kind()).isEqualTo(ReceiveFailedException.Kind.WRITE_FAILED);
                    assertThat(e.code()).isEqualTo(StatusCode.IN_PROGRESS);
                    assertThat(e.getMessage()).endsWith("): RDMA transfer timed out after 3s");
                    assertThat(e.transferId()).isEqualTo("t-2");
                });
    }

    @Test
    void malformedFrameClosesOnlyItsConnection() throws IOException {
        // 0xc1 is a byte msgpack never uses
        MicrometerNotifyRecorder metrics = sendBadFrameBesideAGoodConnection(new byte[] {0, 0, 0, 3, (byte) 0xc1, 1, 2});
        assertThat(metrics.count(NotifyEvent.REJECTED_MALFORMED)).isEqualTo(1);
    }

    @Test
    void oversizedFrameClosesOnlyItsConnection() throws IOException {
        // a 10 MiB length against a 1 KiB maximum: rejected before any payload is read
        MicrometerNotifyRecorder metrics = sendBadFrameBesideAGoodConnection(new byte[] {0, (byte) 0xa0, 0, 0});
        assertThat(metrics.count(NotifyEvent.REJECTED_OVERSIZED)).isEqualTo(1);
    }

    @Test
    void failingHandlerIsLoggedAtErrorOnceAndCountedEachTime() {
        var logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(NotifyServer.class);
        var appender = new ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent>();
        appender.start();
        logger.addAppender(appender);
        try {
            NotifyServer server = NotifyServer.builder().port(0).recorder(counts).handler(message -> {
                throw new IllegalStateException("handler broke on " + message.transferId());
            }).bindNow();
            open.add(server);
            NotifyClient client = client();
            for (int i = 0; i < 3; i++) {
                assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-" + i), WAIT).block(WAIT))
                        .as("a message whose handler throws is still acknowledged").isTrue();
            }

            assertThat(counts.count(NotifyEvent.HANDLER_FAILED)).isEqualTo(3);
            assertThat(appender.list).filteredOn(e -> e.getLevel() == ch.qos.logback.classic.Level.ERROR)
                    .singleElement().satisfies(e -> assertThat(e.getFormattedMessage()).contains("t-0")
                            .contains("HANDLER_FAILED"));
            assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("the connection stays open").isEqualTo(1);
        } finally {
            logger.detachAppender(appender);
        }
    }

    @Test
    void decodeRankOutsideIntRangeClosesOnlyItsConnection() throws Exception {
        MicrometerNotifyRecorder metrics = sendBadFrameBesideAGoodConnection(frame(NotifyCodecTest.remoteBlocksWithRank(1L << 32)));
        assertThat(metrics.count(NotifyEvent.REJECTED_MALFORMED)).isEqualTo(1);
        assertThat(metrics.count(NotifyEvent.RECEIVED)).as("only the good connection's two messages were handed on").isEqualTo(2);
    }

    /**
     * Opens a good connection, sends {@code raw} on a second one and checks that the server closed the
     * second, while the first still delivers without being reopened; returns the server's metrics.
     */
    private MicrometerNotifyRecorder sendBadFrameBesideAGoodConnection(byte[] raw) throws IOException {
        return sendBadFrameBesideAGoodConnection(raw, null);
    }

    /** As above, with server and good client sharing {@code auth}. */
    private MicrometerNotifyRecorder sendBadFrameBesideAGoodConnection(byte[] raw, NotifyAuth auth) throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0, auth);
        NotifyClient client = client(auth);
        client.send(server.address(), new NotifyMessage.WriteDone("before"), WAIT).block(WAIT);

        try (Socket bad = new Socket("127.0.0.1", server.address().getPort())) {
            bad.setSoTimeout(5000);
            bad.getOutputStream().write(raw);
            bad.getOutputStream().flush();
            assertThat(bad.getInputStream().read()).as("the server closes the bad connection").isEqualTo(-1);
        }

        Mono<Void> after = awaiting(registry, "after");
        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("after"), WAIT).block(WAIT)).isTrue();
        after.block(WAIT);
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("the good connection was never dropped").isEqualTo(1);
        return counts;
    }

    @Test
    void correctlySignedWriteDoneIsAccepted() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0, SECRET);
        Mono<Void> expected = awaiting(registry, "t-1");

        assertThat(client(SECRET).send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(counts.count(NotifyEvent.NOTICE_WRITE_DONE)).isEqualTo(1);
        assertThat(counts.count(NotifyEvent.REJECTED_UNAUTHENTICATED)).isZero();
    }

    @Test
    void unsignedFrameIsRejectedAndCountedWhileOtherConnectionsAreServed() throws IOException {
        assertRejectedBesideAGoodConnection(NotifyCodec.encode(new NotifyMessage.WriteDone("forged")));
    }

    @Test
    void frameSignedWithAnotherSecretIsRejectedAndCountedWhileOtherConnectionsAreServed() throws IOException {
        NotifyAuth other = NotifyAuth.of("another-secret-of-32-characters!");
        assertRejectedBesideAGoodConnection(other.sign(new NotifyMessage.WriteDone("forged")));
    }

    @Test
    void frameReplayedAfterTheMaxAgeIsRejectedAndCountedWhileOtherConnectionsAreServed() throws IOException {
        // captured when it was sent, 31 s ago
        VirtualTimeScheduler then = VirtualTimeScheduler.create();
        then.advanceTimeTo(Instant.now().minusSeconds(31));
        byte[] captured = SECRET.clock(then).sign(new NotifyMessage.WriteDone("replayed"));

        assertRejectedBesideAGoodConnection(captured);
    }

    /** Sends {@code payload} beside a signed good connection: rejected, counted, and nothing handed on. */
    private void assertRejectedBesideAGoodConnection(byte[] payload) throws IOException {
        MicrometerNotifyRecorder metrics = sendBadFrameBesideAGoodConnection(frame(payload), SECRET);
        assertThat(metrics.count(NotifyEvent.REJECTED_UNAUTHENTICATED)).isEqualTo(1);
        assertThat(metrics.count(NotifyEvent.RECEIVED)).as("only the good connection's two messages were handed on").isEqualTo(2);
    }

    /** One notify frame holding {@code payload}, as raw bytes. */
    private static byte[] frame(byte[] payload) {
        return java.nio.ByteBuffer.allocate(4 + payload.length).putInt(payload.length).put(payload).array();
    }

    /** A port nothing listens on. */
    private static int closedPort() throws IOException {
        try (var probe = new java.net.ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    /** The transfer's expectation, already subscribed so that it is registered now. */
    private static Mono<Void> awaiting(ExpectedTransfers registry, String transferId) {
        Mono<Void> expected = registry.expect(transferId).cache();
        expected.subscribe(v -> { }, e -> { });
        return expected;
    }

    @Test
    void decodeRestartIsSurvived() {
        ExpectedTransfers first = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(first, 0);
        int port = server.address().getPort();
        NotifyClient client = client();
        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();

        server.close();
        ExpectedTransfers restarted = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer again = decode(restarted, port);
        Mono<Void> expected = awaiting(restarted, "t-2");

        assertThat(client.send(again.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("a new connection to the restarted decode").isEqualTo(2);
    }

    @Test
    void droppedConnectionIsSurvived() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0);
        Relay relay = new Relay(server.address());
        open.add(relay);
        NotifyClient client = client();
        assertThat(client.send(relay.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();

        relay.dropAll();
        Mono<Void> expected = awaiting(registry, "t-2");

        assertThat(client.send(relay.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).isEqualTo(2);
    }

    @Test
    void sendIsCountedUndeliverableAtItsDeadline() throws IOException {
        int closedPort = closedPort();
        NotifyClient client = client();

        Boolean delivered = client.send(new InetSocketAddress("127.0.0.1", closedPort),
                new NotifyMessage.WriteDone("lost"), Duration.ofMillis(300)).block(WAIT);

        assertThat(delivered).isFalse();
        assertThat(clientCounts.count(NotifyEvent.UNDELIVERABLE)).isEqualTo(1);
        assertThat(clientCounts.count(NotifyEvent.SEND_RETRIED)).isPositive();
    }

    @Test
    void connectionWhosePeerNeverAcknowledgesIsReplaced() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0);
        Relay relay = new Relay(server.address(), 1);
        open.add(relay);
        NotifyClient client = NotifyClient.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50))
                .ackTimeout(Duration.ofMillis(200)).recorder(clientCounts).build();
        open.add(client);
        Mono<Void> expected = awaiting(registry, "t-1");

        // the first connection swallows every byte and stays open, as a wedged or half-open peer would
        assertThat(client.send(relay.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("a fresh connection after the ack timeout").isEqualTo(2);
    }

    @Test
    void closedClientSendsNothingMore() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT).recorder(counts);
        NotifyServer server = decode(registry, 0);
        NotifyClient client = client();
        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();

        client.close();

        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT)).isFalse();
        assertThat(clientCounts.count(NotifyEvent.CLIENT_CONNECTION_OPENED)).as("no connection reopened after close").isEqualTo(1);
        assertThat(counts.count(NotifyEvent.RECEIVED)).isEqualTo(1);
    }

    @Test
    void closingTheClientEndsASendThatIsStillRetrying() throws IOException {
        int closedPort = closedPort();
        NotifyClient client = client();
        Mono<Boolean> send = client.send(new InetSocketAddress("127.0.0.1", closedPort),
                new NotifyMessage.WriteDone("t-1"), Duration.ofMinutes(5)).cache();
        send.subscribe();
        Mono.delay(Duration.ofMillis(100)).block();

        client.close();

        assertThat(send.block(WAIT)).as("ended long before its 5 min deadline").isFalse();
        assertThat(clientCounts.count(NotifyEvent.UNDELIVERABLE)).isEqualTo(1);
    }

    /**
     * A TCP forwarder whose connections the test can cut, while it keeps accepting new ones; its first
     * {@code swallow} connections read everything and forward nothing.
     */
    private static final class Relay implements AutoCloseable {
        private final DisposableServer server;
        private final List<Connection> connections = new CopyOnWriteArrayList<>();

        Relay(InetSocketAddress target) {
            this(target, 0);
        }

        Relay(InetSocketAddress target, int swallow) {
            java.util.concurrent.atomic.AtomicInteger accepted = new java.util.concurrent.atomic.AtomicInteger();
            server = TcpServer.create().host("127.0.0.1").port(0)
                    .doOnConnection(connections::add)
                    .handle((in, out) -> accepted.getAndIncrement() < swallow ? in.receive().then() : TcpClient.create().remoteAddress(() -> target).connect()
                            .flatMap(upstream -> {
                                connections.add(upstream);
                                upstream.inbound().receive().retain()
                                        .subscribe(buf -> out.send(Mono.just(buf)).then().subscribe());
                                return upstream.outbound().send(in.receive().retain()).then();
                            }))
                    .bindNow();
        }

        InetSocketAddress address() {
            return (InetSocketAddress) server.address();
        }

        void dropAll() {
            connections.forEach(Connection::dispose);
            connections.forEach(c -> c.onDispose().block(WAIT));
            connections.clear();
        }

        @Override
        public void close() {
            dropAll();
            server.disposeNow();
        }
    }
}
