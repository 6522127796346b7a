package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

/**
 * A decode whose work stops while its {@code /health} still answers is found and ejected: its streams stop moving
 * while another decode's move, or a canary request through it gets no answer; its streams end with the reason, and
 * only a canary brings it back. A long answer, or one request past its deadline on a decode that answers canaries,
 * never counts against it. Refusals and the proxy's own misconfiguration reach the client as what they are.
 */
class StalledDecodesTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private DisposableServer bind(HttpServer server) {
        DisposableServer bound = server.host("127.0.0.1").port(0).bindNow();
        open.add(bound::disposeNow);
        return bound;
    }

    /** A prefill that answers every request at once, as prefill's one token. */
    private DisposableServer prefill() {
        return bind(HttpServer.create().route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("{}")))
                .post("/v1/completions", (req, res) -> req.receive().then(res.header("content-type",
                        "application/json").sendString(Mono.just("{\"choices\": []}")).then()))));
    }

    /**
     * A decode that streams one event per 20 ms, {@code max_tokens} of them, then [DONE]; or, while {@code stalled},
     * only its headers and one comment, then nothing.
     */
    private DisposableServer decode(AtomicBoolean stalled, AtomicInteger calls) {
        return bind(HttpServer.create().route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("{}")))
                .post("/v1/completions", (req, res) -> req.receive().aggregate().asString().flatMap(body -> {
                    calls.incrementAndGet();
                    JsonNode json = read(body);
                    res.header("content-type", "text/event-stream");
                    if (stalled.get()) {
                        return res.sendString(Flux.just(": ok\n\n").concatWith(Flux.never())).then();
                    }
                    int tokens = json.path("max_tokens").asInt(16);
                    return res.sendString(Flux.interval(Duration.ofMillis(20)).take(tokens)
                            .map(i -> "data: {\"t\": " + i + "}\n\n").concatWith(Mono.just("data: [DONE]\n\n"))).then();
                }))));
    }

    private static JsonNode read(String body) {
        try {
            return HttpJson.MAPPER.readTree(body);
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Instance instance(Role role, DisposableServer server, int notifyPort) {
        return new Instance(role, new InetSocketAddress("127.0.0.1", server.port()),
                new InetSocketAddress("127.0.0.1", notifyPort));
    }

    /** The whole answer to a completion through the proxy, as "<status> <body>". */
    private static CompletableFuture<String> complete(ProxyServer proxy, String body) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .timeout(WAIT).toFuture();
    }

    private static String streamed(int maxTokens) {
        return "{\"prompt\": \"a b c\", \"max_tokens\": " + maxTokens + ", \"stream\": true}";
    }

    private static void awaitEjected(InstanceHealth health, Instance instance) throws InterruptedException {
        long until = System.nanoTime() + WAIT.toNanos();
        while (health.usable(instance) && System.nanoTime() < until) {
            Thread.sleep(10);
        }
    }

    @Test
    void aDecodeWhoseStreamsStopWhileAnothersMoveIsEjectedAndItsStreamsEndWithTheReason() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        Instance moving = instance(Role.DECODE, decode(new AtomicBoolean(false), new AtomicInteger()), 7002);
        Instance stalling = instance(Role.DECODE, decode(new AtomicBoolean(true), new AtomicInteger()), 7003);
        registry.ping(moving);
        registry.ping(stalling);
        InstanceHealth health = InstanceHealth.defaults();
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofSeconds(10), health)
                .stallTimeout(Duration.ofMillis(400)).bindNow();
        open.add(proxy);

        // one decode each, in turn (whichever request arrives first); the moving one streams for 1.6 s
        long start = System.nanoTime();
        List<CompletableFuture<String>> answers = List.of(complete(proxy, streamed(80)), complete(proxy, streamed(80)));
        CompletableFuture<Object> firstDone = CompletableFuture.anyOf(answers.toArray(CompletableFuture[]::new));
        String stalled = (String) firstDone.join();
        Duration endedAfter = Duration.ofNanos(System.nanoTime() - start);
        String moved = answers.get(0).join().equals(stalled) ? answers.get(1).join() : answers.get(0).join();

        assertThat(stalled).startsWith("200 ").contains("decode_stalled").contains("stalled").endsWith("data: [DONE]\n\n");
        assertThat(endedAfter).as("long before its 80 tokens would have taken").isLessThan(Duration.ofMillis(1500));
        assertThat(health.usable(stalling)).isFalse();
        assertThat(health.usable(moving)).isTrue();
        assertThat(moved).startsWith("200 ").contains("{\"t\": 79}").doesNotContain("decode_stalled");
    }

    @Test
    void aDecodeWhoseStreamsStopWithNoOtherToCompareIsEjectedByAFailedCanary() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        AtomicInteger calls = new AtomicInteger();
        Instance stalling = instance(Role.DECODE, decode(new AtomicBoolean(true), calls), 7003);
        registry.ping(stalling);
        InstanceHealth health = InstanceHealth.defaults();
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofSeconds(10), health)
                .stallTimeout(Duration.ofMillis(300)).canaryTimeout(Duration.ofMillis(300)).bindNow();
        open.add(proxy);

        String answer = complete(proxy, streamed(80)).join();

        assertThat(answer).startsWith("200 ").contains("decode_stalled").contains("canary");
        assertThat(health.usable(stalling)).isFalse();
        assertThat(calls).as("the client's request and the canary").hasValue(2);
    }

    @Test
    void aDecodeEjectedForItsWorkComesBackThroughACanaryNotItsHealthCheck() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        AtomicBoolean stalls = new AtomicBoolean(true);
        Instance decode = instance(Role.DECODE, decode(stalls, new AtomicInteger()), 7003);
        registry.ping(decode);
        InstanceHealth health = new InstanceHealth(2, 3, Duration.ofMillis(200), System::nanoTime);
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofMillis(100), health)
                .stallTimeout(Duration.ofMillis(300)).canaryTimeout(Duration.ofMillis(300)).bindNow();
        open.add(proxy);
        complete(proxy, streamed(80)).join();
        assertThat(health.usable(decode)).isFalse();

        Thread.sleep(2_500); // past its cooldown, with its /health answering 200 every 100 ms and canaries stalling
        boolean whileStalling = health.usable(decode);
        stalls.set(false);
        long until = System.nanoTime() + WAIT.toNanos();
        while (!health.usable(decode) && System.nanoTime() < until) {
            Thread.sleep(10);
        }

        assertThat(whileStalling).as("its health checks alone do not bring it back").isFalse();
        assertThat(health.usable(decode)).as("a canary answered whole brought it back").isTrue();
    }

    @Test
    void aNonStreamedAnswerLongerThanTheFirstByteTimeoutIsWaitedForByItsMaxTokens() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        // the whole answer comes after 800 ms: past the first-byte timeout, within it and 8 tokens of 100 ms
        Instance decode = instance(Role.DECODE, bind(HttpServer.create().route(r -> r
                .get("/health", (req, res) -> res.sendString(Mono.just("{}")))
                .post("/v1/completions", (req, res) -> req.receive().then(Mono.delay(Duration.ofMillis(800)))
                        .then(res.header("content-type", "application/json")
                                .sendString(Mono.just("{\"choices\": [{\"text\": \"done\"}]}")).then())))), 7002);
        registry.ping(decode);
        InstanceHealth health = InstanceHealth.defaults();
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofSeconds(10), health)
                .firstByteTimeout(Duration.ofMillis(300)).tokenTimeout(Duration.ofMillis(100)).bindNow();
        open.add(proxy);

        String answer = complete(proxy, "{\"prompt\": \"a b c\", \"max_tokens\": 8}").join();

        assertThat(answer).startsWith("200 ").contains("done");
        assertThat(health.usable(decode)).isTrue();
    }

    @Test
    void aRequestPastItsDeadlineOnADecodeThatAnswersCanariesDoesNotCountAgainstIt() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        // slow for the client's 8 tokens, quick for a canary's 2
        Instance decode = instance(Role.DECODE, bind(HttpServer.create().route(r -> r
                .get("/health", (req, res) -> res.sendString(Mono.just("{}")))
                .post("/v1/completions", (req, res) -> req.receive().aggregate().asString().flatMap(body -> {
                    boolean canary = read(body).path("max_tokens").asInt() == 2;
                    return Mono.delay(Duration.ofMillis(canary ? 10 : 3_000))
                            .then(res.header("content-type", "application/json")
                                    .sendString(Mono.just("{\"choices\": []}")).then());
                })))), 7002);
        registry.ping(decode);
        InstanceHealth health = new InstanceHealth(2, 1, Duration.ofSeconds(5), System::nanoTime);
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofSeconds(10), health)
                .firstByteTimeout(Duration.ofMillis(200)).tokenTimeout(Duration.ofMillis(10))
                .canaryTimeout(Duration.ofSeconds(2)).bindNow();
        open.add(proxy);

        String answer = complete(proxy, "{\"prompt\": \"a b c\", \"max_tokens\": 8}").join();
        long until = System.nanoTime() + WAIT.toNanos();
        while (proxy.meterRegistry().get("kvflux.proxy.canaries").functionCounter().count() < 1
                && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        Thread.sleep(300);

        assertThat(answer).startsWith("504 ").contains("upstream_timeout");
        assertThat(proxy.meterRegistry().get("kvflux.proxy.canaries").functionCounter().count()).isEqualTo(1);
        assertThat(health.usable(decode)).as("one failure in a row would eject it, were the timeout counted")
                .isTrue();
    }

    @Test
    void prefillsRefusalOfAClientOverItsShareReachesTheClientAs429WithItsReason() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, bind(HttpServer.create().route(r -> r
                .post("/v1/completions", (req, res) -> req.receive().then(res.status(429)
                        .header("content-type", "application/json")
                        .sendString(Mono.just("{\"error\": {\"message\": \"this client already holds its share\","
                                + " \"type\": \"rate_limit_error\", \"code\": \"client_over_share\"}}")).then())))),
                7001));
        registry.ping(instance(Role.DECODE, bind(HttpServer.create().route(r -> r
                .post("/v1/completions", (req, res) -> Mono.never()))), 7002));
        ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow();
        open.add(proxy);

        String answer = complete(proxy, "{\"prompt\": \"a b c\", \"max_tokens\": 8}").join();

        assertThat(answer).startsWith("429 ").contains("client_over_share").contains("already holds its share");
    }

    @Test
    void aProxyWithoutTheSecretTellsTheClientTheFaultIsItsOwn() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        registry.ping(instance(Role.DECODE, bind(HttpServer.create().route(r -> r
                .post("/v1/completions", (req, res) -> req.receive().then(res.status(401)
                        .sendString(Mono.just("{\"error\": {\"code\": \"unsigned_request\"}}")).then())))), 7002));
        ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow();
        open.add(proxy);

        String answer = complete(proxy, "{\"prompt\": \"a b c\", \"max_tokens\": 8}").join();

        assertThat(answer).startsWith("401 ").contains("proxy_has_no_secret").contains("KVFLUX_NOTIFY_SECRET")
                .contains("not your credentials");
    }

    @Test
    void withOnePrefillTwoDecodesShareTheRequests() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill(), 7001));
        AtomicInteger first = new AtomicInteger();
        AtomicInteger second = new AtomicInteger();
        registry.ping(instance(Role.DECODE, decode(new AtomicBoolean(false), first), 7002));
        registry.ping(instance(Role.DECODE, decode(new AtomicBoolean(false), second), 7003));
        ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow();
        open.add(proxy);

        for (int i = 0; i < 10; i++) {
            assertThat(complete(proxy, streamed(1)).join()).startsWith("200 ");
        }

        assertThat(List.of(first.get(), second.get())).containsExactly(5, 5);
    }
}
