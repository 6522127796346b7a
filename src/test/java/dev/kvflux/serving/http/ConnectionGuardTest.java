package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;

/**
 * A server's connections are shared between client addresses: a connection still sending its request head past the
 * header timeout is closed however its bytes trickle; an address holding its share of such connections, or a server
 * at its cap, makes room for a request by closing the oldest of them; strangers get a small share on a server that
 * trusts signed requests; a client that does not read its answers loses those connections.
 */
class ConnectionGuardTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final InetAddress OTHER_ADDRESS = loopback("127.0.0.2");

    private final List<Socket> sockets = new ArrayList<>();
    private DisposableServer server;
    private ConnectionGuard guard;

    @AfterEach
    void close() throws IOException {
        for (Socket socket : sockets) {
            socket.close();
        }
        if (server != null) {
            server.disposeNow();
        }
    }

    private static InetAddress loopback(String address) {
        try {
            return InetAddress.getByName(address);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A server answering "ok" to every request, its connections guarded under {@code limits}. */
    private void serve(int maxConnections, ConnectionLimits limits, boolean trustsSigned) {
        HttpLimits http = new HttpLimits(Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ofSeconds(60),
                Duration.ofSeconds(30), Duration.ofSeconds(10), maxConnections, limits);
        guard = http.guard(trustsSigned);
        server = http.serverOn("127.0.0.1", 0, guard)
                .handle((req, res) -> {
                    if (req.requestHeaders().contains("x-trust")) {
                        req.withConnection(ConnectionGuard::trust);
                    }
                    return res.sendString(Mono.just("ok"));
                })
                .bindNow();
    }

    /** A connection from {@code from} that has sent the start of a request head and nothing more. */
    private Socket startedHead(InetAddress from) throws IOException {
        Socket socket = new Socket(InetAddress.getLoopbackAddress(), server.port(), from, 0);
        socket.setSoTimeout(200);
        sockets.add(socket);
        OutputStream out = socket.getOutputStream();
        out.write("GET / HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        return socket;
    }

    private static boolean closedByServer(Socket socket) {
        try {
            InputStream in = socket.getInputStream();
            return in.read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            return true;
        }
    }

    private static int closed(List<Socket> sockets) {
        int n = 0;
        for (Socket socket : sockets) {
            if (closedByServer(socket)) {
                n++;
            }
        }
        return n;
    }

    private String request() {
        return HttpClient.create().get().uri("http://127.0.0.1:" + server.port() + "/")
                .responseSingle((res, body) -> body.asString().map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    @Test
    void aConnectionTricklingItsHeadIsClosedAtTheHeaderTimeoutThoughItsBytesKeepComing() throws Exception {
        serve(100, ConnectionLimits.DEFAULT.withHeaderTimeout(Duration.ofMillis(400)), false);
        Socket slow = startedHead(InetAddress.getLoopbackAddress());
        AtomicInteger sent = new AtomicInteger();
        Thread trickle = Thread.ofVirtual().start(() -> {
            try {
                while (sent.get() < 200) {
                    slow.getOutputStream().write('a');
                    slow.getOutputStream().flush();
                    sent.incrementAndGet();
                    Thread.sleep(25);
                }
            } catch (IOException | InterruptedException e) {
                // closed by the server: the point of the test
            }
        });

        long until = System.nanoTime() + WAIT.toNanos();
        while (!closedByServer(slow) && System.nanoTime() < until) {
            Thread.onSpinWait();
        }
        trickle.join(WAIT.toMillis());

        assertThat(closedByServer(slow)).as("the trickling connection was closed").isTrue();
        assertThat(sent.get()).as("bytes it sent before it was closed, one every 25 ms").isLessThan(200);
        assertThat(guard.headerTimeouts()).isEqualTo(1);
    }

    @Test
    void anAddressHoldingItsShareOfHeadsLosesTheOldestToItsNextRequest() throws Exception {
        serve(100, ConnectionLimits.DEFAULT.withPerAddress(100, 4, 16), false);
        List<Socket> heads = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            heads.add(startedHead(InetAddress.getLoopbackAddress()));
        }
        Thread.sleep(700); // past the half second a connection sending its head is spared

        assertThat(request()).isEqualTo("200 ok");
        assertThat(closed(heads)).as("heads closed to make room").isEqualTo(1);
        assertThat(guard.evicted()).isEqualTo(1);
    }

    @Test
    void oneAddressAtItsShareIsRefusedWhileAnotherIsServed() throws Exception {
        serve(100, ConnectionLimits.DEFAULT.withPerAddress(100, 4, 16), false);
        List<Socket> heads = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            heads.add(startedHead(OTHER_ADDRESS));
        }

        assertThat(request()).as("a request from 127.0.0.1").isEqualTo("200 ok");
        assertThat(closed(heads)).as("127.0.0.2's connections beyond its 4, none old enough to make room").isEqualTo(1);
        assertThat(guard.refused()).isEqualTo(1);
    }

    @Test
    void atTheServersCapTheOldestHeadMakesRoomForARequest() throws Exception {
        serve(8, ConnectionLimits.DEFAULT.withPerAddress(100, 100, 16), false);
        List<Socket> heads = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            heads.add(startedHead(OTHER_ADDRESS));
        }
        Thread.sleep(700);

        assertThat(request()).isEqualTo("200 ok");
        assertThat(closed(heads)).as("heads closed to make room").isGreaterThanOrEqualTo(1);
        assertThat(guard.open()).isLessThanOrEqualTo(8);
    }

    @Test
    void strangersGetTheirShareWhileATrustedConnectionKeepsServing() throws Exception {
        serve(100, ConnectionLimits.DEFAULT.withMaxUntrusted(4), true);
        Socket trusted = new Socket(InetAddress.getLoopbackAddress(), server.port());
        trusted.setSoTimeout(5_000);
        sockets.add(trusted);
        String trustedRequest = "GET / HTTP/1.1\r\nHost: x\r\nx-trust: yes\r\n\r\n";
        trusted.getOutputStream().write(trustedRequest.getBytes(StandardCharsets.US_ASCII));
        assertThat(readAnswer(trusted)).contains("ok");
        List<Socket> strangers = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            strangers.add(startedHead(OTHER_ADDRESS));
        }

        assertThat(closed(strangers)).as("strangers beyond their share of 4").isEqualTo(2);
        trusted.getOutputStream().write(trustedRequest.getBytes(StandardCharsets.US_ASCII));
        assertThat(readAnswer(trusted)).as("the trusted connection's next request").contains("ok");
        assertThat(guard.untrusted()).isEqualTo(4);
    }

    /** Reads one short answer (its head and a body of "ok"). */
    private static String readAnswer(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        StringBuilder got = new StringBuilder();
        while (!got.toString().endsWith("ok")) {
            int b = in.read();
            if (b < 0) {
                break;
            }
            got.append((char) b);
        }
        return got.toString();
    }

    /** A server that answers every request with an endless stream, counting the streams that end. */
    private AtomicInteger streamForever(ConnectionLimits limits) {
        AtomicInteger ended = new AtomicInteger();
        HttpLimits http = new HttpLimits(Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ofSeconds(60),
                Duration.ofSeconds(30), Duration.ofSeconds(10), 100, limits);
        guard = http.guard(false);
        byte[] chunk = new byte[16 << 10];
        server = http.serverOn("127.0.0.1", 0, guard)
                .handle((req, res) -> res.sendByteArray(Flux.interval(Duration.ofMillis(1)).map(i -> chunk))
                        .then().doFinally(signal -> ended.incrementAndGet()))
                .bindNow();
        return ended;
    }

    /** A client that asks for an answer and never reads it. */
    private void neverReads() throws IOException {
        Socket socket = new Socket();
        socket.setReceiveBufferSize(4096);
        socket.connect(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), server.port()));
        sockets.add(socket);
        socket.getOutputStream().write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    }

    private static void awaitAtLeast(AtomicInteger count, int n) throws InterruptedException {
        long until = System.nanoTime() + WAIT.toNanos();
        while (count.get() < n && System.nanoTime() < until) {
            Thread.sleep(20);
        }
    }

    @Test
    void aConnectionWhoseClientDoesNotReadIsClosedAtTheWriteTimeout() throws Exception {
        AtomicInteger ended = streamForever(ConnectionLimits.DEFAULT.withWriteTimeout(Duration.ofMillis(500)));

        neverReads();
        awaitAtLeast(ended, 1);

        assertThat(ended).as("the stream the client did not read ended").hasValue(1);
        assertThat(guard.writeStalls()).isEqualTo(1);
    }

    @Test
    void anAddressWithMoreUnreadAnswersThanItMayLosesTheOneStalledLongest() throws Exception {
        AtomicInteger ended = streamForever(ConnectionLimits.DEFAULT.withPerAddress(100, 64, 2));

        for (int i = 0; i < 3; i++) {
            neverReads();
        }
        awaitAtLeast(ended, 1);
        Thread.sleep(200);

        assertThat(ended).as("streams ended long before the 30 s write timeout").hasValue(1);
        assertThat(guard.writeStalls()).isEqualTo(1);
    }
}
