package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * A role with a notify secret serves only requests the proxy signed: unsigned, forged, replayed and stale ones
 * get 401 before anything is parsed, queued or allocated, and make the role connect nowhere.
 */
class SignedRequestsTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final String SECRET = "signed-requests-test-secret-0123456789";
    private static final NotifyAuth AUTH = NotifyAuth.of(SECRET);

    private final SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
    private ServerSocket peer;
    private final AtomicInteger peerConnections = new AtomicInteger();
    private DecodeServer decode;
    private PrefillServer prefill;

    @BeforeEach
    void start() throws IOException {
        // a stand-in for the peer's notify port: it counts who connects to it
        peer = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
        Thread.ofVirtual().start(() -> {
            while (!peer.isClosed()) {
                try (Socket s = peer.accept()) {
                    peerConnections.incrementAndGet();
                } catch (IOException closed) {
                    return;
                }
            }
        });
        decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(2)).auth(AUTH).bindNow();
        prefill = PrefillServer.builder().model(SMALL).engine(engine).transferTimeout(Duration.ofSeconds(1))
                .auth(AUTH).bindNow();
    }

    @AfterEach
    void stop() throws IOException {
        prefill.close(Duration.ZERO);
        decode.close();
        engine.close();
        peer.close();
    }

    private String body(String id) {
        return "{\"prompt\": \"a b c\", \"max_tokens\": 2, \"kv_transfer_params\": {\"transfer_id\": \"" + id
                + "\", \"remote_notify\": \"127.0.0.1:" + peer.getLocalPort() + "\"}}";
    }

    private static long held(BlockAllocator.Snapshot blocks) {
        return blocks.owners();
    }

    private void assertNothingTaken() {
        assertThat(held(decode.blocks())).as("decode's blocks").isZero();
        assertThat(held(prefill.blocks())).as("prefill's blocks").isZero();
        assertThat(prefill.writesInFlight()).as("prefill's write places").isZero();
        assertThat(peerConnections).as("connections to the named peer").hasValue(0);
    }

    @Test
    void anUnsignedRequestIsRefusedWith401AndTakesNothing() {
        for (InetSocketAddress role : new InetSocketAddress[] {decode.httpAddress(), prefill.httpAddress()}) {
            assertThat(Completions.post(role, body("unsigned")).block(WAIT)).startsWith("401 ")
                    .contains("unsigned_request");
        }
        assertNothingTaken();
    }

    @Test
    void aRequestSignedWithAnotherSecretIsRefused() {
        RequestAuth forger = RequestAuth.of(NotifyAuth.of("not-the-cluster-secret-0123456789"));
        for (InetSocketAddress role : new InetSocketAddress[] {decode.httpAddress(), prefill.httpAddress()}) {
            assertThat(Completions.postSigned(role, body("forged"), "forged", forger, h -> { }).block(WAIT))
                    .startsWith("401 ").contains("bad_signature");
        }
        assertNothingTaken();
    }

    @Test
    void aSignedRequestWithAnAlteredBodyIsRefused() {
        RequestAuth proxy = RequestAuth.of(AUTH);
        String signed = body("altered");
        byte[] bytes = signed.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        var headers = new io.netty.handler.codec.http.DefaultHttpHeaders();
        proxy.sign(headers, "POST", "/v1/completions", "altered", Completions.destination(decode.httpAddress()), "",
                bytes);
        String answer = reactor.netty.http.client.HttpClient.create().headers(h -> h.add(headers)).post()
                .uri("http://127.0.0.1:" + decode.httpAddress().getPort() + "/v1/completions")
                .send(reactor.core.publisher.Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(
                        signed.replace("\"max_tokens\": 2", "\"max_tokens\": 3").getBytes())))
                .responseSingle((res, content) -> content.asString().map(t -> res.status().code() + " " + t))
                .block(WAIT);
        assertThat(answer).startsWith("401 ").contains("bad_signature");
        assertNothingTaken();
    }

    @Test
    void aReplayedSignedRequestIsRefusedTheSecondTime() {
        RequestAuth proxy = RequestAuth.of(AUTH);
        String[] signedHeaders = new String[3];
        var first = Completions.postSigned(decode.httpAddress(), body("once"), "once", proxy, h -> {
            signedHeaders[0] = h.get(RequestAuth.TRANSFER_HEADER);
            signedHeaders[1] = h.get(RequestAuth.TS_HEADER);
            signedHeaders[2] = h.get(RequestAuth.SIGNATURE_HEADER);
        }).toFuture();
        long until = System.nanoTime() + WAIT.toNanos();
        while (decode.blocks().owners() == 0 && System.nanoTime() < until) {
            Thread.onSpinWait(); // the original has reached decode and holds its blocks
        }
        String replay = Completions.postSigned(decode.httpAddress(), body("once"), "once", proxy, h -> h
                .set(RequestAuth.TS_HEADER, signedHeaders[1]).set(RequestAuth.SIGNATURE_HEADER, signedHeaders[2]))
                .block(WAIT);

        assertThat(replay).startsWith("401 ").contains("replayed_request");
        assertThat(first.join()).as("the original was served (its KV never comes: no prefill wrote it)")
                .doesNotStartWith("401");
    }

    @Test
    void aRequestSignedLongerAgoThanTheMaxAgeIsRefusedAsStale() {
        VirtualTimeScheduler past = VirtualTimeScheduler.create();
        past.advanceTimeTo(java.time.Instant.ofEpochMilli(System.currentTimeMillis() - 60_000));
        RequestAuth stale = RequestAuth.of(NotifyAuth.of(SECRET).clock(past));
        assertThat(Completions.postSigned(decode.httpAddress(), body("old"), "old", stale, h -> { }).block(WAIT))
                .startsWith("401 ").contains("stale_request");
        assertNothingTaken();
    }

    @Test
    void aSignatureForOneTransferCannotCarryAnother() {
        RequestAuth proxy = RequestAuth.of(AUTH);
        assertThat(Completions.postSigned(prefill.httpAddress(), body("named-in-body"), "signed-for", proxy, h -> { })
                .block(WAIT)).startsWith("401 ").contains("bad_signature");
        assertNothingTaken();
    }

    @Test
    void aRequestSignedForAnotherInstanceIsRefusedThere() {
        DecodeServer other = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(2)).auth(AUTH)
                .bindNow();
        try {
            RequestAuth proxy = RequestAuth.of(AUTH);
            String forOther = Completions.destination(other.httpAddress());
            var headers = new io.netty.handler.codec.http.DefaultHttpHeaders();
            byte[] bytes = body("misdirected").getBytes(java.nio.charset.StandardCharsets.UTF_8);
            proxy.sign(headers, "POST", "/v1/completions", "misdirected", forOther, "", bytes);

            String answer = reactor.netty.http.client.HttpClient.create().headers(h -> h.add(headers)).post()
                    .uri("http://127.0.0.1:" + decode.httpAddress().getPort() + "/v1/completions")
                    .send(reactor.core.publisher.Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(bytes)))
                    .responseSingle((res, content) -> content.asString().map(t -> res.status().code() + " " + t))
                    .block(WAIT);

            assertThat(answer).startsWith("401 ").contains("wrong_destination").contains(forOther);
            assertNothingTaken();
        } finally {
            other.close();
        }
    }

    @Test
    void aForgedRequestIsRefusedFromItsHeadersBeforeItsBodyIsSent() throws IOException {
        RequestAuth forger = RequestAuth.of(NotifyAuth.of("not-the-cluster-secret-0123456789"));
        var headers = new io.netty.handler.codec.http.DefaultHttpHeaders();
        forger.sign(headers, "POST", "/v1/completions", "forged-large", Completions.destination(decode.httpAddress()),
                "", new byte[16]);
        StringBuilder head = new StringBuilder("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 16000000\r\n");
        headers.forEach(h -> head.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n"));
        try (Socket socket = new Socket("127.0.0.1", decode.httpAddress().getPort())) {
            socket.setSoTimeout(5_000);
            socket.getOutputStream().write(head.append("\r\n").toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            // none of the 16 MB is sent: the answer comes from the headers alone, and the connection closes after it
            String answer = new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);

            assertThat(answer).startsWith("HTTP/1.1 401").contains("bad_signature");
        }
        assertNothingTaken();
    }

    @Test
    void aRolesHealthSaysWhichInstanceAnswersAtItsAddress() {
        String health = reactor.netty.http.client.HttpClient.create().get()
                .uri("http://127.0.0.1:" + decode.httpAddress().getPort() + "/health")
                .responseContent().aggregate().asString().block(WAIT);

        assertThat(health).contains("\"role\":\"decode\"").contains("\"incarnation\":" + decode.incarnation())
                .contains("\"notify\":\"127.0.0.1:" + decode.notifyAddress().getPort() + "\"");
    }

    @Test
    void refusalsAreCountedByReasonInTheRolesMetrics() {
        Completions.post(decode.httpAddress(), body("unsigned")).block(WAIT);
        assertThat(Completions.metrics(decode.httpAddress()).count("kvflux_http_requests_unauthenticated_total",
                "reason", "unsigned_request")).isEqualTo(1);
    }
}
