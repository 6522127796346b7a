package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;

/**
 * A body is read strictly: malformed UTF-8, repeated keys and lone surrogates are refused with 400 naming the
 * problem, and a body that never finishes gets 408, not 500.
 */
class StrictBodiesTest {
    private DisposableServer server;

    @BeforeEach
    void start() {
        server = new HttpLimits(Duration.ofSeconds(60), Duration.ofMillis(300), Duration.ofSeconds(60),
                Duration.ofSeconds(30), Duration.ofSeconds(10), 16)
                .serverOn("127.0.0.1", 0)
                .route(r -> r.post("/echo", (req, res) -> HttpJson.withBody(req, res, body -> {
                    try {
                        HttpJson.object(body);
                    } catch (IllegalArgumentException e) {
                        return HttpJson.error(res, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                                "bad_request", e.getMessage());
                    }
                    return res.sendString(Mono.just("ok")).then();
                })))
                .bindNow();
    }

    @AfterEach
    void stop() {
        server.disposeNow();
    }

    /** Sends raw bytes as a request and returns the status line and body as text. */
    private String raw(byte[] request) throws Exception {
        try (Socket socket = new Socket("127.0.0.1", server.port())) {
            socket.setSoTimeout(5000);
            OutputStream out = socket.getOutputStream();
            out.write(request);
            out.flush();
            InputStream in = socket.getInputStream();
            return new String(in.readNBytes(2048), StandardCharsets.UTF_8);
        } catch (java.net.SocketTimeoutException e) {
            return "timed out";
        }
    }

    private String post(byte[] body) throws Exception {
        byte[] head = ("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " + body.length
                + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
        byte[] request = new byte[head.length + body.length];
        System.arraycopy(head, 0, request, 0, head.length);
        System.arraycopy(body, 0, request, head.length, body.length);
        return raw(request);
    }

    @Test
    void malformedUtf8IsRefusedWith400() throws Exception {
        byte[] body = "{\"prompt\": \"a\u00e9\"}".getBytes(StandardCharsets.UTF_8);
        body[body.length - 3] = (byte) 0xC3;
        body[body.length - 2] = (byte) 0x28; // not a continuation byte
        assertThat(post(body)).startsWith("HTTP/1.1 400").contains("invalid_utf8").contains("at byte");
    }

    @Test
    void aRepeatedKeyIsRefusedWith400() throws Exception {
        assertThat(post("{\"prompt\": \"a\", \"prompt\": \"b\"}".getBytes(StandardCharsets.UTF_8)))
                .startsWith("HTTP/1.1 400").contains("Duplicate field");
    }

    @Test
    void aLoneSurrogateIsRefusedWith400() throws Exception {
        assertThat(post("{\"prompt\": \"a\\ud800b\"}".getBytes(StandardCharsets.UTF_8)))
                .startsWith("HTTP/1.1 400").contains("lone UTF-16 surrogate");
        assertThat(post("{\"prompt\": \"a\\ud83d\\ude00b\"}".getBytes(StandardCharsets.UTF_8)))
                .as("a surrogate pair is well-formed text").startsWith("HTTP/1.1 200");
    }

    @Test
    void aChunkedBodyThatNeverEndsGets408() throws Exception {
        String answer = raw(("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        assertThat(answer).startsWith("HTTP/1.1 408").contains("body_incomplete");
    }
}
