package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;

/**
 * A body handed over in the direct buffer it arrived into is whole, well-formed UTF-8 when the handler sees it, and
 * released, with its share of the budget, once the handler's answer has ended; one of megabytes is handled off the
 * event loop.
 */
class BodyBufferTest {
    private final AtomicReference<ByteBuf> seen = new AtomicReference<>();
    private final AtomicReference<String> handledOn = new AtomicReference<>();
    private volatile boolean direct;
    private DisposableServer server;

    @BeforeEach
    void start() {
        server = HttpLimits.DEFAULT.serverOn("127.0.0.1", 0)
                .route(r -> r.post("/json", (req, res) -> HttpJson.withUtf8Buffer(req, res, body -> {
                    seen.set(body);
                    handledOn.set(Thread.currentThread().getName());
                    direct = body.isDirect();
                    try {
                        var json = HttpJson.object(body, HttpJson.MAPPER);
                        return res.sendString(Mono.just("prompt " + json.get("prompt").asText().length())).then();
                    } catch (IllegalArgumentException e) {
                        return HttpJson.error(res, io.netty.handler.codec.http.HttpResponseStatus.BAD_REQUEST,
                                "invalid_request_error", "invalid_request", e.getMessage());
                    }
                })))
                .bindNow();
    }

    @AfterEach
    void stop() {
        server.disposeNow();
    }

    private String post(byte[] body) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + server.port() + "/json")
                .send(Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(body)))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(Duration.ofSeconds(10));
    }

    private static int settledRefCnt(ByteBuf buffer) {
        long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (buffer.refCnt() > 0 && System.nanoTime() < until) {
            Thread.onSpinWait();
        }
        return buffer.refCnt();
    }

    @Test
    void aLargeBodyIsReadWholeAndItsBufferReleasedOnceAnswered() {
        String prompt = "word ".repeat(40_000);
        assertThat(post(("{\"prompt\": \"" + prompt + "\"}").getBytes(StandardCharsets.UTF_8)))
                .isEqualTo("200 prompt " + prompt.length());
        assertThat(direct).isTrue();
        assertThat(settledRefCnt(seen.get())).isZero();
        long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (BodyBudget.process().reserved() > 0 && System.nanoTime() < until) {
            Thread.onSpinWait();
        }
        assertThat(BodyBudget.process().reserved()).isZero();
    }

    @Test
    void aBodyOfMegabytesIsHandledOffTheEventLoopAndASmallOneOnIt() {
        String large = "word ".repeat(HttpJson.OFF_LOOP_BYTES / 5 + 1);
        assertThat(post(("{\"prompt\": \"" + large + "\"}").getBytes(StandardCharsets.UTF_8))).startsWith("200 ");
        assertThat(handledOn.get()).as("past %d bytes", HttpJson.OFF_LOOP_BYTES).startsWith("boundedElastic");
        assertThat(settledRefCnt(seen.get())).isZero();

        assertThat(post("{\"prompt\": \"a b c\"}".getBytes(StandardCharsets.UTF_8))).isEqualTo("200 prompt 5");
        assertThat(handledOn.get()).as("a small body").doesNotStartWith("boundedElastic");
    }

    @Test
    void aBodyRefusedByItsHandlerIsReleasedToo() {
        assertThat(post("{\"prompt\": ".getBytes(StandardCharsets.UTF_8))).startsWith("400 ").contains("not JSON");
        assertThat(settledRefCnt(seen.get())).isZero();
    }

    @Test
    void malformedUtf8NeverReachesTheHandler() {
        assertThat(post(new byte[] {'{', '"', 'p', '"', ':', '"', (byte) 0xC0, (byte) 0x80, '"', '}'}))
                .startsWith("400 ").contains("invalid_utf8").contains("at byte 6");
        assertThat(seen.get()).isNull();
    }
}
