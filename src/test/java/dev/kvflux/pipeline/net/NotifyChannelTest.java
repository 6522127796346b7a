package dev.kvflux.pipeline.net;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
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

/** The notify channel over loopback: what reaches decode, and what a bad peer can and cannot break. */
class NotifyChannelTest {
    private static final Duration WAIT = Duration.ofSeconds(5);

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private NotifyServer decode(ExpectedTransfers registry, int port) {
        NotifyServer server = NotifyServer.builder().port(port).maxFrameBytes(1024)
                .metrics(registry.metrics()).handler(registry).bind().block(WAIT);
        open.add(server);
        return server;
    }

    private NotifyClient client() {
        NotifyClient client = NotifyClient.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build();
        open.add(client);
        return client;
    }

    @Test
    void writeDoneReachesDecode() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer server = decode(registry, 0);
        Mono<Void> expected = awaiting(registry, "t-1");

        assertThat(client().send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(registry.metrics().writeDone()).isEqualTo(1);
    }

    @Test
    void writeFailedReachesDecodeWithCodeAndReason() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer server = decode(registry, 0);
        Mono<Void> expected = awaiting(registry, "t-2");

        client().send(server.address(), new NotifyMessage.WriteFailed("t-2", StatusCode.IN_PROGRESS,
                "RDMA transfer timed out after 3s"), WAIT).block(WAIT);

        assertThatThrownBy(() -> expected.block(WAIT))
                .isInstanceOfSatisfying(RemoteWriteFailedException.class, e -> {
                    assertThat(e.code()).isEqualTo(StatusCode.IN_PROGRESS);
                    assertThat(e.reason()).isEqualTo("RDMA transfer timed out after 3s");
                    assertThat(e.transferId()).isEqualTo("t-2");
                });
    }

    @Test
    void malformedFrameClosesOnlyItsConnection() throws IOException {
        // 0xc1 is a byte msgpack never uses
        NotifyMetrics metrics = sendBadFrameBesideAGoodConnection(new byte[] {0, 0, 0, 3, (byte) 0xc1, 1, 2});
        assertThat(metrics.malformedFrames()).isEqualTo(1);
    }

    @Test
    void oversizedFrameClosesOnlyItsConnection() throws IOException {
        // a 10 MiB length against a 1 KiB maximum: rejected before any payload is read
        NotifyMetrics metrics = sendBadFrameBesideAGoodConnection(new byte[] {0, (byte) 0xa0, 0, 0});
        assertThat(metrics.oversizedFrames()).isEqualTo(1);
    }

    /**
     * Opens a good connection, sends {@code raw} on a second one and checks that the server closed the
     * second, while the first still delivers without being reopened; returns the server's metrics.
     */
    private NotifyMetrics sendBadFrameBesideAGoodConnection(byte[] raw) throws IOException {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer server = decode(registry, 0);
        NotifyClient client = client();
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
        assertThat(client.metrics().connectionsOpened()).as("the good connection was never dropped").isEqualTo(1);
        return registry.metrics();
    }

    /** The transfer's expectation, already subscribed so that it is registered now. */
    private static Mono<Void> awaiting(ExpectedTransfers registry, String transferId) {
        Mono<Void> expected = registry.expect(transferId).cache();
        expected.subscribe(v -> { }, e -> { });
        return expected;
    }

    @Test
    void decodeRestartIsSurvived() {
        ExpectedTransfers first = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer server = decode(first, 0);
        int port = server.address().getPort();
        NotifyClient client = client();
        assertThat(client.send(server.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();

        server.close();
        ExpectedTransfers restarted = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer again = decode(restarted, port);
        Mono<Void> expected = awaiting(restarted, "t-2");

        assertThat(client.send(again.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(client.metrics().connectionsOpened()).as("a new connection to the restarted decode").isEqualTo(2);
    }

    @Test
    void droppedConnectionIsSurvived() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(WAIT);
        NotifyServer server = decode(registry, 0);
        Relay relay = new Relay(server.address());
        open.add(relay);
        NotifyClient client = client();
        assertThat(client.send(relay.address(), new NotifyMessage.WriteDone("t-1"), WAIT).block(WAIT)).isTrue();

        relay.dropAll();
        Mono<Void> expected = awaiting(registry, "t-2");

        assertThat(client.send(relay.address(), new NotifyMessage.WriteDone("t-2"), WAIT).block(WAIT)).isTrue();
        expected.block(WAIT);
        assertThat(client.metrics().connectionsOpened()).isEqualTo(2);
    }

    @Test
    void sendIsCountedUndeliverableAtItsDeadline() throws IOException {
        int closedPort;
        try (var probe = new java.net.ServerSocket(0)) {
            closedPort = probe.getLocalPort();
        }
        NotifyClient client = client();

        Boolean delivered = client.send(new InetSocketAddress("127.0.0.1", closedPort),
                new NotifyMessage.WriteDone("lost"), Duration.ofMillis(300)).block(WAIT);

        assertThat(delivered).isFalse();
        assertThat(client.metrics().undeliverable()).isEqualTo(1);
        assertThat(client.metrics().sendRetries()).isPositive();
    }

    /** A TCP forwarder whose connections the test can cut, while it keeps accepting new ones. */
    private static final class Relay implements AutoCloseable {
        private final DisposableServer server;
        private final List<Connection> connections = new CopyOnWriteArrayList<>();

        Relay(InetSocketAddress target) {
            server = TcpServer.create().host("127.0.0.1").port(0)
                    .doOnConnection(connections::add)
                    .handle((in, out) -> TcpClient.create().remoteAddress(() -> target).connect()
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
