package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.resources.ConnectionProvider;

/** The HTTP servers' connection bounds, the client pools' idle bound, and the words for a port that cannot be bound. */
class HttpLimitsTest {
    private static final Duration SHORT = Duration.ofMillis(300);
    private static final HttpLimits QUICK = new HttpLimits(SHORT, SHORT, Duration.ofMillis(600), SHORT, SHORT, 1000);

    private ProxyServer proxy;

    @AfterEach
    void close() {
        if (proxy != null) {
            proxy.close();
        }
    }

    private Socket connectToQuickProxy() throws IOException {
        proxy = ProxyServer.builder().discoveryPort(0).registry(new InstanceRegistry(Duration.ofSeconds(30)))
                .httpLimits(QUICK).bindNow();
        Socket socket = new Socket(InetAddress.getLoopbackAddress(), proxy.address().getPort());
        socket.setSoTimeout(5_000);
        return socket;
    }

    /** Reads until the server closes; fails the test if it does not within the socket's timeout. */
    private static String readUntilClosed(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        StringBuilder got = new StringBuilder();
        try {
            int b;
            while ((b = in.read()) >= 0) {
                got.append((char) b);
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server kept the connection open for 5 s; got: " + got, e);
        }
        return got.toString();
    }

    @Test
    void aConnectionThatSendsNothingIsClosedAtTheIdleTimeout() throws IOException {
        try (Socket socket = connectToQuickProxy()) {
            long start = System.nanoTime();

            readUntilClosed(socket);

            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(4));
        }
    }

    @Test
    void aRequestWhoseBodyStopsComingIsClosed() throws IOException {
        try (Socket socket = connectToQuickProxy()) {
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 1000\r\n\r\n{\"prompt\": \"a").getBytes(StandardCharsets.US_ASCII));
            out.flush();

            String answer = readUntilClosed(socket);

            assertThat(answer).doesNotContain("HTTP/1.1 200");
        }
    }

    @Test
    void aServerStaysUsableAfterClosingAnIdleConnection() throws IOException {
        try (Socket idle = connectToQuickProxy()) {
            readUntilClosed(idle);
        }
        String health = reactor.netty.http.client.HttpClient.create().get()
                .uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                .responseContent().aggregate().asString().block(Duration.ofSeconds(5));

        assertThat(health).contains("\"status\":\"ok\"");
    }

    @Test
    void pooledConnectionsIdleLongerThanTheLimitAreClosed() throws InterruptedException {
        DisposableServer server = QUICK.serverOn("127.0.0.1", 0)
                .handle((req, res) -> res.sendString(Mono.just("ok"))).bindNow();
        ConnectionProvider pool = QUICK.poolNamed("limits-test").maxConnections(4).metrics(false).build();
        java.util.concurrent.atomic.AtomicInteger closed = new java.util.concurrent.atomic.AtomicInteger();
        try {
            reactor.netty.http.client.HttpClient.create(pool)
                    .doOnConnected(c -> c.onDispose(closed::incrementAndGet))
                    .get().uri("http://127.0.0.1:" + server.port() + "/").responseContent().aggregate().asString()
                    .block(Duration.ofSeconds(5));

            long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (closed.get() == 0 && System.nanoTime() < until) {
                Thread.sleep(20);
            }

            assertThat(closed.get()).as("the idle pooled connection was closed in the background").isEqualTo(1);
        } finally {
            pool.dispose();
            server.disposeNow();
        }
    }

    @Test
    void aClientsMalformedRequestIsAnsweredWithoutAWarningPerRequest() throws IOException {
        // reactor-netty logs every request it cannot decode at warn, unthrottled: 2,000 bad requests wrote
        // 2,000 lines into decode's log in 2 s; the client's 400 says enough
        ch.qos.logback.classic.Logger netty = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory
                .getLogger("reactor.netty.http.server.HttpServerOperations");
        var events = new ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent>();
        events.start();
        netty.addAppender(events);
        DisposableServer server = HttpLimits.server("127.0.0.1", 0)
                .handle((req, res) -> req.receive().then(res.sendString(Mono.just("ok")).then())).bindNow();
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
            socket.setSoTimeout(5_000);
            socket.getOutputStream().write(("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 400");
        } finally {
            server.disposeNow();
            netty.detachAppender(events);
        }
        assertThat(events.list).as("reactor-netty's per-request warnings").isEmpty();
    }

    @Test
    void aBusyPortIsNamedAsInUse() throws IOException {
        try (ServerSocket busy = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            assertThatThrownBy(() -> ProxyServer.builder().port(busy.getLocalPort())
                    .registry(new InstanceRegistry(Duration.ofSeconds(1))).bindNow())
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("port " + busy.getLocalPort() + " on 127.0.0.1 is in use by another process");
        }
    }

    @Test
    void anAddressOfNoInterfaceIsNamedAsSuch() {
        // 192.0.2.1 is TEST-NET-1: never an address of this host
        assertThatThrownBy(() -> ProxyServer.builder().host("192.0.2.1")
                .registrationSecret(dev.kvflux.transfer.notify.NotifyAuth.of("http-limits-test-secret-0123456789"))
                .registry(new InstanceRegistry(Duration.ofSeconds(1))).bindNow())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("address 192.0.2.1 is not one of this host's addresses")
                .message().doesNotContain("another process");
    }

    @Test
    void permissionDeniedAndOutOfRangeAreNamedAsSuch() {
        assertThat(HttpLimits.bindFailure("0.0.0.0", 80, new IllegalStateException(new BindException("Permission denied"))))
                .contains("needs privileges").doesNotContain("another process");
        assertThat(HttpLimits.bindFailure("0.0.0.0", 70_000, new IllegalArgumentException("port out of range:70000")))
                .contains("out of range");
        assertThatThrownBy(() -> ProxyServer.builder().port(70_000)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("port 70000 is out of range");
    }

    @Test
    void aConnectionBeyondTheCapIsClosedAtOnceAndThePortServesAgainWhenOneCloses() throws IOException {
        proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(30)))
                .httpLimits(new HttpLimits(Duration.ofSeconds(30), SHORT, SHORT, SHORT, SHORT, 3)).bindNow();
        java.util.List<Socket> sockets = new java.util.ArrayList<>();
        try {
            for (int i = 0; i < 4; i++) {
                Socket socket = new Socket(InetAddress.getLoopbackAddress(), proxy.address().getPort());
                socket.setSoTimeout(50);
                sockets.add(socket);
            }
            // the channels are initialised on several event loops, so any one of the four may be the one refused
            java.util.List<Socket> closed = new java.util.ArrayList<>();
            long until = System.nanoTime() + Duration.ofSeconds(3).toNanos();
            while (System.nanoTime() < until) {
                for (Socket socket : sockets) {
                    if (!closed.contains(socket) && closedByPeer(socket)) {
                        closed.add(socket);
                    }
                }
            }

            assertThat(closed).as("exactly the connection beyond the cap of 3 is closed").hasSize(1);
            sockets.stream().filter(socket -> !closed.contains(socket)).findFirst().orElseThrow().close();
            // the place frees once the server has seen that close, which it learns asynchronously
            String health = reactor.netty.http.client.HttpClient.create().get()
                    .uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                    .responseContent().aggregate().asString()
                    .retryWhen(reactor.util.retry.Retry.fixedDelay(50, Duration.ofMillis(100)))
                    .block(Duration.ofSeconds(10));

            assertThat(health).contains("\"status\":\"ok\"");
        } finally {
            for (Socket socket : sockets) {
                socket.close();
            }
        }
    }

    private static boolean closedByPeer(Socket socket) {
        try {
            return socket.getInputStream().read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            return true;
        }
    }
}
