package dev.kvflux.serving.etcd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.tools.chaos.EtcdProcess;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;
import reactor.test.StepVerifier;

/**
 * The client against a real etcd (started from {@code /usr/bin/etcd}, Debian's etcd-server, on free loopback ports)
 * and against fake gateways that break its bounds.
 */
class EtcdClientTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    @TempDir
    static Path dir;
    private static EtcdProcess etcd;

    @BeforeAll
    static void startEtcd() throws Exception {
        etcd = EtcdProcess.start(dir);
    }

    @AfterAll
    static void stopEtcd() throws Exception {
        etcd.close();
    }

    private static EtcdClient client() {
        return EtcdClient.of(List.of(etcd.endpoint()));
    }

    private static InetSocketAddress deadEndpoint() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return InetSocketAddress.createUnresolved("127.0.0.1", probe.getLocalPort());
        }
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void aPutWithALeaseIsReadByARangeOverItsPrefixAndGoesWhenTheLeaseIsRevoked() {
        try (EtcdClient client = client()) {
            long lease = client.grant(Duration.ofSeconds(30)).block(WAIT);
            client.put("/t/range/a", bytes("one"), lease).block(WAIT);
            client.put("/t/range/b", bytes("two"), 0).block(WAIT);
            client.put("/t/rangeX", bytes("not under the prefix"), 0).block(WAIT);

            EtcdClient.Range range = client.range("/t/range/", 10, 64 << 10).block(WAIT);
            client.revoke(lease).block(WAIT);
            EtcdClient.Range after = client.range("/t/range/", 10, 64 << 10).block(WAIT);

            assertThat(range.kvs()).extracting(EtcdClient.KeyValue::key).containsExactly("/t/range/a", "/t/range/b");
            assertThat(range.kvs().get(0).value()).isEqualTo(bytes("one"));
            assertThat(range.kvs().get(0).lease()).isEqualTo(lease);
            assertThat(range.revision()).isPositive();
            assertThat(after.kvs()).extracting(EtcdClient.KeyValue::key).containsExactly("/t/range/b");
        }
    }

    @Test
    void aRangeReadsAtMostItsLimitAndSaysMoreMatched() {
        try (EtcdClient client = client()) {
            for (int i = 0; i < 5; i++) {
                client.put("/t/limit/" + i, bytes("v"), 0).block(WAIT);
            }

            EtcdClient.Range range = client.range("/t/limit/", 3, 64 << 10).block(WAIT);

            assertThat(range.kvs()).hasSize(3);
            assertThat(range.more()).isTrue();
        }
    }

    @Test
    void aWatchSeesPutsAndDeletesUnderItsPrefixFromTheRevisionAsked() {
        try (EtcdClient client = client()) {
            long from = client.put("/t/watch/before", bytes("old"), 0).block(WAIT);

            StepVerifier.create(client.watch("/t/watch/", from + 1, 1 << 20)
                            .filter(r -> r instanceof EtcdClient.WatchResponse.Events)
                            .cast(EtcdClient.WatchResponse.Events.class)
                            .flatMapIterable(EtcdClient.WatchResponse.Events::events))
                    .then(() -> {
                        client.put("/t/watch/a", bytes("A"), 0).block(WAIT);
                        client.put("/t/other", bytes("not watched"), 0).block(WAIT);
                        client.delete("/t/watch/a").block(WAIT);
                    })
                    .assertNext(e -> {
                        assertThat(e.delete()).isFalse();
                        assertThat(e.kv().key()).isEqualTo("/t/watch/a");
                        assertThat(e.kv().value()).isEqualTo(bytes("A"));
                    })
                    .assertNext(e -> {
                        assertThat(e.delete()).isTrue();
                        assertThat(e.kv().key()).isEqualTo("/t/watch/a");
                    })
                    .thenCancel()
                    .verify(WAIT);
        }
    }

    @Test
    void aWatchFromACompactedRevisionIsCancelledAndCompletes() throws Exception {
        try (EtcdClient client = client()) {
            long first = client.put("/t/compact/a", bytes("1"), 0).block(WAIT);
            long last = client.put("/t/compact/a", bytes("2"), 0).block(WAIT);
            java.net.http.HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://"
                            + etcd.endpoint().getHostString() + ":" + etcd.endpoint().getPort() + "/v3/kv/compaction"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"revision\": \"" + last + "\"}")).build(),
                    HttpResponse.BodyHandlers.discarding());

            List<EtcdClient.WatchResponse> responses = client.watch("/t/compact/", first, 1 << 20).collectList()
                    .block(WAIT);

            assertThat(responses.getLast()).isInstanceOfSatisfying(EtcdClient.WatchResponse.Canceled.class,
                    c -> assertThat(c.compactRevision()).isEqualTo(last));
        }
    }

    @Test
    void aKeepAliveOfALiveLeaseSaysItsTtlAndOfAGoneOneZero() {
        try (EtcdClient client = client()) {
            long lease = client.grant(Duration.ofSeconds(20)).block(WAIT);

            long alive = client.keepAlive(lease).block(WAIT);
            client.revoke(lease).block(WAIT);
            long gone = client.keepAlive(lease).block(WAIT);

            assertThat(alive).isBetween(19L, 20L);
            assertThat(gone).isZero();
        }
    }

    @Test
    void aPutWithALeaseEtcdNoLongerHoldsFailsSayingSo() {
        try (EtcdClient client = client()) {
            long lease = client.grant(Duration.ofSeconds(20)).block(WAIT);
            client.revoke(lease).block(WAIT);

            assertThatThrownBy(() -> client.put("/t/lost", bytes("x"), lease).block(WAIT))
                    .isInstanceOfSatisfying(EtcdException.class, e -> assertThat(e.leaseNotFound()).isTrue())
                    .hasMessageContaining("lease not found");
        }
    }

    @Test
    void aDownEndpointIsSkippedForTheNextOneAndTheOneThatAnsweredIsTriedFirstAfter() throws Exception {
        InetSocketAddress dead = deadEndpoint();
        try (EtcdClient client = EtcdClient.of(List.of(dead, etcd.endpoint()))) {
            assertThat(client.status().block(WAIT)).isPositive();
            long start = System.nanoTime();
            client.status().block(WAIT);

            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(500));
        }
    }

    @Test
    void withEveryEndpointDownACallFailsAsUnreachableNamingThem() throws Exception {
        InetSocketAddress a = deadEndpoint();
        InetSocketAddress b = deadEndpoint();
        try (EtcdClient client = EtcdClient.of(List.of(a, b))) {
            assertThatThrownBy(() -> client.status().block(WAIT))
                    .isInstanceOfSatisfying(EtcdException.class,
                            e -> assertThat(e.kind()).isEqualTo(EtcdException.Kind.UNREACHABLE))
                    .hasMessageContaining("etcd is unreachable at 127.0.0.1:" + a.getPort() + ", 127.0.0.1:" + b.getPort());
        }
    }

    @Test
    void anEndpointThatNeverAnswersIsGivenUpAfterTheRequestTimeout() throws Exception {
        try (EtcdClient warm = client()) {
            warm.status().block(WAIT); // a cold JVM's first call alone can take longer than the timeout below
        }
        try (ServerSocket silent = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
             EtcdClient client = EtcdClient.of(List.of(InetSocketAddress.createUnresolved("127.0.0.1",
                     silent.getLocalPort()), etcd.endpoint()), Duration.ofMillis(500))) {
            long start = System.nanoTime();

            assertThat(client.status().block(WAIT)).isPositive();
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(3));
        }
    }

    /** A gateway that answers every call with {@code body}, streamed in 8 KiB chunks. */
    private static DisposableServer fakeGateway(String body) {
        return HttpServer.create().host("127.0.0.1").port(0)
                .handle((req, res) -> req.receive().then(Mono.defer(() -> res.header("content-type", "application/json")
                        .sendString(Flux.range(0, (body.length() + 8191) / 8192)
                                .map(i -> body.substring(i * 8192, Math.min(body.length(), (i + 1) * 8192))))
                        .then())))
                .bindNow();
    }

    private static InetSocketAddress at(DisposableServer server) {
        return InetSocketAddress.createUnresolved("127.0.0.1", ((InetSocketAddress) server.address()).getPort());
    }

    @Test
    void anAnswerOverItsBoundFailsTheCallWithoutBeingBuffered() {
        DisposableServer gateway = fakeGateway("{\"kvs\": [\"" + "x".repeat(1 << 20) + "\"]}");
        try (EtcdClient client = EtcdClient.of(List.of(at(gateway)))) {
            assertThatThrownBy(() -> client.range("/t/", 10, 64 << 10).block(WAIT))
                    .isInstanceOfSatisfying(EtcdException.class,
                            e -> assertThat(e.kind()).isEqualTo(EtcdException.Kind.MALFORMED))
                    .hasMessageContaining("over the 65536 bytes read");
        } finally {
            gateway.disposeNow();
        }
    }

    @Test
    void aWatchLineOverItsBoundEndsTheWatchWithAnError() {
        DisposableServer gateway = fakeGateway("{\"result\": {\"created\": true}}\n{\"result\": \"" + "x".repeat(200_000));
        try (EtcdClient client = EtcdClient.of(List.of(at(gateway)))) {
            StepVerifier.create(client.watch("/t/", 1, 64 << 10))
                    .assertNext(r -> assertThat(r).isInstanceOf(EtcdClient.WatchResponse.Created.class))
                    .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(EtcdException.class)
                            .hasMessageContaining("over the 65536 bytes"))
                    .verify(WAIT);
        } finally {
            gateway.disposeNow();
        }
    }

    @Test
    void anAnswerThatIsNotTheGatewaysJsonFailsAsMalformed() {
        DisposableServer gateway = fakeGateway("{\"header\": {\"revision\": \"not a number\"}}");
        try (EtcdClient client = EtcdClient.of(List.of(at(gateway)))) {
            assertThatThrownBy(() -> client.status().block(WAIT))
                    .isInstanceOfSatisfying(EtcdException.class,
                            e -> assertThat(e.kind()).isEqualTo(EtcdException.Kind.MALFORMED))
                    .hasMessageContaining("\"revision\" is not a 64-bit integer");
        } finally {
            gateway.disposeNow();
        }
    }
}
