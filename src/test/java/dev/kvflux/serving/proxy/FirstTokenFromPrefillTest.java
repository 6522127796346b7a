package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

/**
 * {@code --first-token prefill}: prefill's token reaches the client while decode has sent nothing, then decode's
 * stream follows without its own first event; a decode failing after that ends the stream with an error event.
 * Instances are stand-ins whose answers the test releases, so what comes first is decided, not raced.
 */
class FirstTokenFromPrefillTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final String PREFILL_ANSWER = "{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":7,"
            + "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" t0\",\"finish_reason\":\"length\"}]}";

    private final Sinks.Empty<Void> decodeGo = Sinks.empty();
    private DisposableServer prefill;
    private DisposableServer decode;
    private ProxyServer proxy;

    @AfterEach
    void stop() {
        if (proxy != null) {
            proxy.close();
        }
        if (prefill != null) {
            prefill.disposeNow();
            decode.disposeNow();
        }
    }

    private static String event(String text) {
        return "data: {\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"created\":7,\"model\":\"m\",\"choices\":"
                + "[{\"index\":0,\"text\":\"" + text + "\",\"finish_reason\":null}]}\n\n";
    }

    /** Prefill answers {@code status} with {@code body} at once; decode sends {@code decoding} once let go. */
    private void start(int prefillStatus, String prefillBody, int decodeStatus, Flux<String> decoding) {
        start(prefillStatus, prefillBody, decodeStatus, decoding, ProxyServer.DEFAULT_FIRST_BYTE_TIMEOUT);
    }

    private void start(int prefillStatus, String prefillBody, int decodeStatus, Flux<String> decoding,
            Duration firstByteTimeout) {
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(
                        res.status(prefillStatus).header("content-type", "application/json")
                                .sendString(Mono.just(prefillBody)).then())))
                .bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(decodeGo.asMono()).then(
                        res.status(decodeStatus).header("content-type", decodeStatus == 200 ? "text/event-stream"
                                : "application/json").sendString(decoding).then())))
                .bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(new Instance(Role.PREFILL, at(prefill), new InetSocketAddress("127.0.0.1", 7001)));
        registry.ping(new Instance(Role.DECODE, at(decode), new InetSocketAddress("127.0.0.1", 7002)));
        proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofMinutes(10), InstanceHealth.defaults())
                .firstToken(FirstToken.PREFILL).firstByteTimeout(firstByteTimeout).bindNow();
    }

    /** A streamed completion's status and reads, as they arrive. */
    private Flux<String> streamed(int maxTokens) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(("{\"prompt\": \"a b c\", \"max_tokens\": " + maxTokens
                        + ", \"stream\": true}").getBytes(StandardCharsets.UTF_8))))
                .response((res, content) -> Flux.concat(Mono.just("status " + res.status().code()),
                        content.asString()));
    }

    /** Everything after the status, joined, taken as it comes until the stream ends. */
    private static List<String> events(String all) {
        List<String> out = new ArrayList<>();
        for (String e : all.split("\n\n")) {
            if (!e.isBlank()) {
                out.add(e.trim());
            }
        }
        return out;
    }

    /**
     * A streamed request of 3 tokens: what the client had before decode was let go (the status first), and then
     * everything after the status, once the stream ended.
     */
    private String[] streamReleasingDecodeAfterTheFirstToken() throws InterruptedException {
        List<String> reads = new java.util.concurrent.CopyOnWriteArrayList<>();
        reactor.core.publisher.Sinks.Empty<Void> ended = Sinks.empty();
        reactor.core.publisher.Sinks.Empty<Void> firstToken = Sinks.empty();
        reactor.core.Disposable client = streamed(3).doFinally(signal -> ended.tryEmitEmpty()).subscribe(read -> {
            reads.add(read);
            if (read.contains(" t0")) {
                firstToken.tryEmitEmpty();
            }
        });
        try {
            firstToken.asMono().block(WAIT); // the client has prefill's token, or the test fails here
            String before = String.join("", reads);
            decodeGo.tryEmitEmpty();
            ended.asMono().block(WAIT);
            return new String[] {before, String.join("", reads.subList(1, reads.size()))};
        } finally {
            client.dispose();
        }
    }

    @Test
    void prefillsTokenReachesTheClientBeforeDecodeSendsAnythingThenDecodesStreamFollowsWithoutItsFirstEvent()
            throws InterruptedException {
        start(200, PREFILL_ANSWER, 200, Flux.just(event(" t0"), event(" t1"), event(" t2"), "data: [DONE]\n\n"));
        String[] seen = streamReleasingDecodeAfterTheFirstToken();

        assertThat(seen[0]).as("before decode sent anything").isEqualTo("status 200" + event(" t0"));
        assertThat(events(seen[1])).containsExactly(event(" t0").trim(), event(" t1").trim(), event(" t2").trim(),
                "data: [DONE]");
    }

    @Test
    void aDecodeFailingAfterPrefillsTokenEndsTheStreamWithAnErrorEvent() throws InterruptedException {
        start(200, PREFILL_ANSWER, 503, Flux.just("{\"error\":{\"message\":\"kv transfer failed\"}}"));
        String[] seen = streamReleasingDecodeAfterTheFirstToken();

        assertThat(seen[0]).isEqualTo("status 200" + event(" t0"));
        List<String> events = events(seen[1]);
        assertThat(events.getFirst()).isEqualTo(event(" t0").trim());
        assertThat(events.get(1)).contains("\"error\"").contains("kv transfer failed");
        assertThat(events.getLast()).isEqualTo("data: [DONE]");
    }

    @Test
    void aDecodeErrorRacingPrefillsTokenGivesTheClientOneWholeAnswerEitherWay() {
        start(200, PREFILL_ANSWER, 503, Flux.just("{\"error\":{\"message\":\"kv transfer failed\"}}"));
        decodeGo.tryEmitEmpty();
        String all = String.join("", streamed(3).collectList().block(WAIT));

        assertThat(all).as("decode's answer, or prefill's token and then decode's error")
                .satisfiesAnyOf(a -> assertThat(a).isEqualTo("status 503{\"error\":{\"message\":\"kv transfer failed\"}}"),
                        a -> assertThat(a).startsWith("status 200" + event(" t0")).contains("kv transfer failed")
                                .endsWith("data: [DONE]\n\n"));
    }

    @Test
    void aDecodeThatSendsNothingAfterPrefillsTokenEndsTheStreamAtTheFirstByteTimeout() {
        start(200, PREFILL_ANSWER, 200, Flux.just(event(" t0"), "data: [DONE]\n\n"), Duration.ofMillis(500));
        // decode is never let go
        String all = String.join("", streamed(3).collectList().block(WAIT));

        assertThat(all).startsWith("status 200" + event(" t0"));
        List<String> events = events(all.substring(("status 200" + event(" t0")).length()));
        assertThat(events.getFirst()).contains("\"error\"").contains("sent no answer within 500ms");
        assertThat(events.getLast()).isEqualTo("data: [DONE]");
    }

    @Test
    void aPrefillThatFailsBeforeDecodeStreamsIsAnsweredAsWithoutTheMode() {
        start(503, "{\"error\":{\"message\":\"prefill_queue_full\"}}", 200, Flux.just(event(" t0"), "data: [DONE]\n\n"));
        String all = String.join("", streamed(3).collectList().block(WAIT));

        assertThat(all).doesNotStartWith("status 200").contains("prefill");
    }

    @Test
    void aRequestOfOneTokenIsDecodesAsWithoutTheMode() {
        start(200, PREFILL_ANSWER, 200, Flux.just(event(" d0"), "data: [DONE]\n\n"));
        decodeGo.tryEmitEmpty();
        String all = String.join("", streamed(1).collectList().block(WAIT));

        assertThat(events(all.substring("status 200".length()))).containsExactly(event(" d0").trim(), "data: [DONE]");
    }

    @Test
    void theFirstEventOfAStreamIsDroppedWhateverReadsItSpans() {
        Flux<ByteBuf> reads = Flux.just("data: {\"a\"", ":1}\r", "\n\r", "\ndata: {\"b\":2}\n\n", "data: [DONE]\n\n")
                .map(s -> Unpooled.copiedBuffer(s, StandardCharsets.UTF_8));
        String rest = String.join("", PrefillFirstToken.afterFirstEvent(reads).map(buf -> {
            String s = buf.toString(StandardCharsets.UTF_8);
            buf.release();
            return s;
        }).collectList().block(WAIT));

        assertThat(rest).isEqualTo("data: {\"b\":2}\n\ndata: [DONE]\n\n");
    }

    @Test
    void aFirstEventWithoutEndPastItsBoundFailsTheStream() {
        byte[] noEnd = new byte[PrefillFirstToken.MAX_FIRST_EVENT_BYTES + 1];
        java.util.Arrays.fill(noEnd, (byte) 'x');
        Mono<List<ByteBuf>> rest = PrefillFirstToken.afterFirstEvent(Flux.just(Unpooled.wrappedBuffer(noEnd)))
                .collectList();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> rest.block(WAIT))
                .hasMessageContaining("first event is longer than");
    }

    @Test
    void prefillsAnswerBecomesAnEventShapedAsDecodesForCompletionsAndChat() {
        String completion = PrefillFirstToken.firstEvent(PREFILL_ANSWER, dev.kvflux.serving.api.CompletionApi.COMPLETIONS)
                .toString(StandardCharsets.UTF_8);
        assertThat(completion).isEqualTo(event(" t0"));

        String chat = PrefillFirstToken.firstEvent("{\"id\":\"chatcmpl-x\",\"object\":\"chat.completion\",\"created\":7,"
                + "\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\" t0\"},"
                + "\"finish_reason\":\"length\"}]}", dev.kvflux.serving.api.CompletionApi.CHAT)
                .toString(StandardCharsets.UTF_8);
        assertThat(chat).isEqualTo("data: {\"id\":\"chatcmpl-x\",\"object\":\"chat.completion.chunk\",\"created\":7,"
                + "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" t0\"},"
                + "\"finish_reason\":null}]}\n\n");

        assertThat(PrefillFirstToken.firstEvent("{\"choices\":[]}", dev.kvflux.serving.api.CompletionApi.COMPLETIONS))
                .as("no token: decode's stream, whole").isNull();
        assertThat(PrefillFirstToken.firstEvent("not json", dev.kvflux.serving.api.CompletionApi.CHAT)).isNull();
    }

    private static InetSocketAddress at(DisposableServer server) {
        return new InetSocketAddress("127.0.0.1", ((InetSocketAddress) server.address()).getPort());
    }
}
