package dev.kvflux.pipeline.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
    private static final HttpLimits QUICK = new HttpLimits(SHORT, SHORT, Duration.ofMillis(600), SHORT, SHORT);

    private ProxyServer proxy;

    @AfterEach
    void close() {
        if (proxy != null) {
            proxy.close();
        }
    }

    private Socket connectToQuickProxy() throws IOException {
        proxy = ProxyServer.builder().discoveryPort(0).registry(new InstanceRegistry(Duration.ofSeconds(30)))
                .httpLimits(QUICK).start();
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
    void connectionsBeyondTheServersCapAreClosedAtOnceAndFreedPlacesAreReused() throws IOException, InterruptedException {
        // without a cap, idle connections to one HTTP port exhausted the process's file descriptors and took
        // its notify port and /health down with it
        DisposableServer server = HttpLimits.DEFAULT.serverOn("127.0.0.1", 0, 2)
                .route(routes -> routes.get("/health", (req, res) -> res.sendString(Mono.just("ok"))))
                .bindNow();
        try (Socket first = new Socket(InetAddress.getLoopbackAddress(), server.port());
                Socket second = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
            // both answered, so both hold their places before the third arrives
            assertThat(keepAliveGet(first)).endsWith("ok");
            assertThat(keepAliveGet(second)).endsWith("ok");
            try (Socket third = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
                third.setSoTimeout(5_000);
                assertThat(readUntilClosed(third)).isEmpty();
            }
            assertThat(get(first, "/health")).startsWith("HTTP/1.1 200").endsWith("ok");
            first.close();
            assertThat(getOnceAPlaceFrees(server.port())).startsWith("HTTP/1.1 200").endsWith("ok");
        } finally {
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

    /** GET /health on a connection that stays open; the answer, read until its 2-byte body "ok" has come. */
    private static String keepAliveGet(Socket socket) throws IOException {
        socket.setSoTimeout(5_000);
        socket.getOutputStream().write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        InputStream in = socket.getInputStream();
        StringBuilder got = new StringBuilder();
        while (!got.toString().endsWith("\r\n\r\nok")) {
            int b = in.read();
            if (b < 0) {
                throw new AssertionError("the server closed a connection within its cap; got: " + got);
            }
            got.append((char) b);
        }
        return got.toString();
    }

    /** GET /health on a new connection, retried while the server still refuses one; its answer. */
    private static String getOnceAPlaceFrees(int port) throws InterruptedException {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (System.nanoTime() < deadline) {
            try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
                socket.setSoTimeout(5_000);
                String answer = get(socket, "/health");
                if (!answer.isEmpty()) {
                    return answer;
                }
            } catch (IOException refused) {
                // closed at once: the freed place is not seen yet
            }
            Thread.sleep(20);
        }
        throw new AssertionError("the server kept refusing connections after one of its two closed");
    }

    /** One GET on a fresh keep-alive-less request; returns the whole answer once the server has sent it. */
    private static String get(Socket socket, String path) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        out.flush();
        return readUntilClosed(socket);
    }

    @Test
    void aBusyPortIsNamedAsInUse() throws IOException {
        try (ServerSocket busy = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            assertThatThrownBy(() -> ProxyServer.builder().port(busy.getLocalPort())
                    .registry(new InstanceRegistry(Duration.ofSeconds(1))).start())
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("port " + busy.getLocalPort() + " on 127.0.0.1 is in use by another process");
        }
    }

    @Test
    void anAddressOfNoInterfaceIsNamedAsSuch() {
        // 192.0.2.1 is TEST-NET-1: never an address of this host
        assertThatThrownBy(() -> ProxyServer.builder().host("192.0.2.1")
                .registry(new InstanceRegistry(Duration.ofSeconds(1))).start())
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
}
