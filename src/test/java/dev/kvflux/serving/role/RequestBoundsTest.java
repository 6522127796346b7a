package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.net.InetSocketAddress;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** What one request may cost a role at most: the model length, and a share of the role's blocks. */
class RequestBoundsTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    private static String body(String id, int words, int maxTokens, InetSocketAddress peer) {
        return "{\"prompt\": \"" + "w ".repeat(words).trim() + "\", \"max_tokens\": " + maxTokens
                + ", \"kv_transfer_params\": {\"transfer_id\": \"" + id + "\", \"remote_notify\": \"127.0.0.1:"
                + peer.getPort() + "\"}}";
    }

    @Test
    void bothRolesRefuseARequestOverTheModelLengthWith400NamingTheLimit() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SMALL).maxModelLen(64).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine).maxModelLen(64).bindNow()) {
            for (InetSocketAddress role : new InetSocketAddress[] {decode.httpAddress(), prefill.httpAddress()}) {
                assertThat(Completions.post(role, body("long", 60, 5, decode.notifyAddress())).block(WAIT))
                        .startsWith("400 ").contains("context_length_exceeded").contains("model length of 64");
            }
            assertThat(decode.blocks().owners()).isZero();
            assertThat(prefill.blocks().owners()).isZero();
        }
    }

    @Test
    void aRequestNeedingMoreThanItsShareOfBlocksIsRefusedWhileSmallerOnesAreServed() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SMALL).kvBlocks(16).maxRequestShare(0.25)
                     .receiveDeadline(Duration.ofSeconds(1)).bindNow()) {
            // 16-token blocks: 80 words need 5 blocks, more than a quarter of 16
            assertThat(Completions.post(decode.httpAddress(), body("big", 80, 1, decode.notifyAddress())).block(WAIT))
                    .startsWith("400 ").contains("request_too_large").contains("more than the 4");
            assertThat(decode.blocks().owners()).isZero();
            // 60 words need 4 blocks: within the share (its KV never comes: no prefill is running)
            assertThat(Completions.post(decode.httpAddress(), body("fits", 60, 1, decode.notifyAddress())).block(WAIT))
                    .doesNotContain("request_too_large");
        }
    }

    /** Posts a completion that names {@code client} as the proxy names a request's client. */
    private static reactor.core.publisher.Mono<String> postFor(String client, InetSocketAddress http, String body) {
        return reactor.netty.http.client.HttpClient.create().headers(h -> h.set("x-kvflux-client", client)).post()
                .uri("http://127.0.0.1:" + http.getPort() + "/v1/completions")
                .send(reactor.core.publisher.Mono.just(io.netty.buffer.Unpooled.wrappedBuffer(
                        body.getBytes(java.nio.charset.StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text));
    }

    @Test
    void aClientHoldingItsShareOfBlocksIsRefused429WhileAnotherClientIsServed() throws InterruptedException {
        try (DecodeServer decode = DecodeServer.builder().model(SMALL).kvBlocks(64).clientShare(0.5)
                .receiveDeadline(Duration.ofSeconds(3)).bindNow()) {
            // 320 words need 20 blocks; a client may hold 32 of the 64. Its KV never comes (no prefill runs), so the
            // first request holds its blocks until the receive deadline
            var first = postFor("key:hog", decode.httpAddress(), body("hog-1", 320, 1, decode.notifyAddress()))
                    .toFuture();
            long until = System.nanoTime() + WAIT.toNanos();
            while (decode.blocks().owners() == 0 && System.nanoTime() < until) {
                Thread.sleep(5);
            }

            String second = postFor("key:hog", decode.httpAddress(), body("hog-2", 320, 1, decode.notifyAddress()))
                    .block(WAIT);
            var other = postFor("key:legit", decode.httpAddress(), body("legit", 320, 1, decode.notifyAddress()))
                    .toFuture();
            Thread.sleep(200);

            assertThat(second).startsWith("429 ").contains("client_over_share").contains("32 of them");
            assertThat(other.isDone() ? other.join() : "still waiting for its KV").doesNotStartWith("429");
            assertThat(decode.blocks().owners()).as("the hog's first request and the other client's").isEqualTo(2);
            first.join();
            other.join();
        }
    }
}
