package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
import reactor.netty.http.client.HttpClient;

/**
 * Request bodies are held within a budget: a body that does not fit beside those held is answered 503 with
 * {@code Retry-After} before it is read, and a body's share comes back when its request ends.
 */
class BodyBudgetTest {
    private final BodyBudget budget = BodyBudget.of(HttpJson.MAX_BODY_BYTES);
    private DisposableServer server;

    @BeforeEach
    void start() {
        server = HttpLimits.DEFAULT.serverOn("127.0.0.1", 0)
                .route(r -> r.post("/body", (req, res) -> HttpJson.withBytes(req, res, budget, HttpJson.MAX_BODY_BYTES,
                        "send less", null, bytes -> res.sendString(Mono.just("read " + bytes.length)).then())))
                .bindNow();
    }

    @AfterEach
    void stop() {
        server.disposeNow();
    }

    private String post(String body) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + server.port() + "/body")
                .send(Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().map(text -> res.status().code() + " " + text))
                .block(Duration.ofSeconds(10));
    }

    /** What the budget holds once the server has ended the request (its end runs after the client has its answer). */
    private long settledReserve() {
        long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (budget.reserved() > 0 && System.nanoTime() < until) {
            Thread.onSpinWait();
        }
        return budget.reserved();
    }

    @Test
    void aBodyThatDoesNotFitIsAnswered503WithRetryAfterBeforeItIsSent() throws Exception {
        assertThat(budget.tryReserve(budget.capacity() - 1000)).isTrue();
        try (Socket socket = new Socket("127.0.0.1", server.port())) {
            socket.setSoTimeout(5000);
            OutputStream out = socket.getOutputStream();
            // the head declares 2,000 bytes, and none of them is sent
            out.write(("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            String answer = new String(in.readAllBytes(), StandardCharsets.UTF_8);

            assertThat(answer).startsWith("HTTP/1.1 503").containsIgnoringCase("retry-after: 1")
                    .contains("body_budget_exhausted");
        }
        assertThat(budget.refusals()).isEqualTo(1);
    }

    @Test
    void aBodysShareComesBackWhenItsRequestEnds() {
        assertThat(post("x".repeat(5000))).isEqualTo("200 read 5000");
        assertThat(settledReserve()).isZero();
    }

    @Test
    void aBodyOfNoDeclaredLengthTakesItsShareAsItComes() {
        assertThat(budget.tryReserve(budget.capacity() - 100)).isTrue();
        String answer = HttpClient.create().post().uri("http://127.0.0.1:" + server.port() + "/body")
                .send((req, out) -> out.sendString(reactor.core.publisher.Flux.just("x".repeat(60), "y".repeat(60))))
                .responseSingle((res, content) -> content.asString().map(text -> res.status().code() + " " + text))
                .block(Duration.ofSeconds(10));

        assertThat(answer).startsWith("503 ").contains("body_budget_exhausted");
        budget.release(budget.capacity() - 100);
        assertThat(settledReserve()).as("held once the refused request has ended").isZero();
    }

    @Test
    void aBudgetIsSizedFromTheHeapAndHoldsAtLeastOneLargestBody() {
        assertThat(BodyBudget.ofHeap(512L << 20).capacity()).isEqualTo((512L << 20) / 4 / BodyBudget.HEAP_COST);
        assertThat(BodyBudget.ofHeap(64L << 20).capacity()).isEqualTo(HttpJson.MAX_BODY_BYTES);
        assertThatThrownBy(() -> BodyBudget.of(1024)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("at least one body of 16 MiB");
    }
}
