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
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The proxy over loopback, with stand-in prefill and decode instances that record what they receive. */
class ProxyServerTest {
    private static final Duration WAIT = Duration.ofSeconds(5);

    private final BlockingQueue<JsonNode> toPrefill = new ArrayBlockingQueue<>(4);
    private final BlockingQueue<JsonNode> toDecode = new ArrayBlockingQueue<>(4);
    private DisposableServer prefill;
    private DisposableServer decode;
    private ProxyServer proxy;

    @AfterEach
    void close() {
        for (var server : new DisposableServer[] {prefill, decode}) {
            if (server != null) {
                server.disposeNow();
            }
        }
        if (proxy != null) {
            proxy.close();
        }
    }

    private DisposableServer recording(BlockingQueue<JsonNode> into, Flux<String> answer) {
        return HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().aggregate().asString()
                        .doOnNext(body -> into.add(HttpJson.object(body)))
                        .then(res.header("content-type", "text/event-stream").sendString(answer).then())))
                .bindNow();
    }

    private static Instance instance(Role role, DisposableServer server, int notifyPort) {
        return new Instance(role, new InetSocketAddress("127.0.0.1", ((InetSocketAddress) server.address()).getPort()),
                new InetSocketAddress("127.0.0.1", notifyPort));
    }

    private String post(String path, String body) {
        return post(proxy.address(), path, body);
    }

    static String post(InetSocketAddress to, String path, String body) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + to.getPort() + path)
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    @Test
    void proxyRoutesToPrefillAndDecodeAndStreamsDecodesAnswer() throws InterruptedException {
        prefill = recording(toPrefill, Flux.just("{\"choices\":[]}"));
        decode = recording(toDecode, Flux.just("data: {\"a\":1}\n\n", "data: [DONE]\n\n"));
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        registry.ping(instance(Role.DECODE, decode, 7002));
        proxy = ProxyServer.builder().registry(registry).bindNow();

        String answer = post("/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 16, \"stream\": true}");

        assertThat(answer).isEqualTo("200 data: {\"a\":1}\n\ndata: [DONE]\n\n");
        JsonNode p = toPrefill.poll(5, TimeUnit.SECONDS);
        JsonNode d = toDecode.poll(5, TimeUnit.SECONDS);
        assertThat(p.get("max_tokens").asInt()).isEqualTo(1);
        assertThat(d.get("max_tokens").asInt()).isEqualTo(16);
        assertThat(p.at("/kv_transfer_params/remote_notify").asText()).isEqualTo("127.0.0.1:7002");
        assertThat(d.at("/kv_transfer_params/remote_notify").asText()).isEqualTo("127.0.0.1:7001");
        assertThat(p.at("/kv_transfer_params/transfer_id").asText())
                .isNotEmpty().isEqualTo(d.at("/kv_transfer_params/transfer_id").asText());
        assertThat(p.at("/kv_transfer_params/do_remote_decode").asBoolean()).isTrue();
        assertThat(d.at("/kv_transfer_params/do_remote_prefill").asBoolean()).isTrue();
    }

    @Test
    void proxyFailsTheRequestAtOnceWhenPrefillCannotBeReached() throws Exception {
        java.util.concurrent.CountDownLatch decodeCancelled = new java.util.concurrent.CountDownLatch(1);
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never()
                        .doOnCancel(decodeCancelled::countDown).then()))
                .bindNow();
        int closedPort;
        try (var probe = new java.net.ServerSocket(0)) {
            closedPort = probe.getLocalPort();
        }
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(new Instance(Role.PREFILL, new InetSocketAddress("127.0.0.1", closedPort),
                new InetSocketAddress("127.0.0.1", 7001)));
        registry.ping(instance(Role.DECODE, decode, 7002));
        proxy = ProxyServer.builder().registry(registry).bindNow();

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(answer).startsWith("502 ").contains("prefill_failed").contains(":" + closedPort);
        assertThat(decodeCancelled.await(5, TimeUnit.SECONDS)).as("decode's request is cancelled").isTrue();
    }

    @Test
    void prefillRefusingAsOverloadedReachesTheClientAs503() throws Exception {
        java.util.concurrent.CountDownLatch decodeCancelled = new java.util.concurrent.CountDownLatch(1);
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> res.status(503)
                        .sendString(Mono.just("{\"error\":{\"code\":\"prefill_queue_full\"}}")).then()))
                .bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never()
                        .doOnCancel(decodeCancelled::countDown).then()))
                .bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        registry.ping(instance(Role.DECODE, decode, 7002));
        proxy = ProxyServer.builder().registry(registry).bindNow();

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(answer).startsWith("503 ").contains("prefill_overloaded").contains("prefill_queue_full");
        assertThat(decodeCancelled.await(5, TimeUnit.SECONDS)).as("decode's request is cancelled").isTrue();
    }

    @Test
    void requestBeyondTheConnectionsAndPendingBoundIsRefusedAtOnceWith503() {
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never())).bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never())).bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        registry.ping(instance(Role.DECODE, decode, 7002));
        // one connection to each instance and 2 requests waiting for it: the fourth request is refused
        proxy = ProxyServer.builder().registry(registry).upstreamTimeout(Duration.ofMinutes(1)).maxConnections(1)
                .bindNow();
        String uri = "http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions";
        HttpClient client = HttpClient.create();

        String first = Flux.range(0, 4)
                .flatMap(i -> client.post().uri(uri)
                        .send(Mono.just(Unpooled.wrappedBuffer("{\"prompt\": \"a\"}".getBytes(StandardCharsets.UTF_8))))
                        .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                                .map(text -> res.status().code() + " " + text)))
                .blockFirst(WAIT);

        assertThat(first).startsWith("503 ").contains("proxy_overloaded").contains("overloaded")
                .contains("lower the client's concurrency");
    }

    /**
     * A proxy letting {@code maxInFlight} requests past it, {@code maxQueued} more waiting, before stand-in instances
     * that take requests and never answer; {@code reachedDecode} counts those decode was sent. Its completions URI.
     */
    private String holdingProxy(int maxInFlight, int maxQueued,
                                java.util.concurrent.atomic.AtomicInteger reachedDecode) {
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never())).bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> {
                    reachedDecode.incrementAndGet();
                    return Mono.never();
                })).bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        registry.ping(instance(Role.DECODE, decode, 7002));
        proxy = ProxyServer.builder().registry(registry).upstreamTimeout(Duration.ofMinutes(1))
                .maxInFlight(maxInFlight, maxQueued).bindNow();
        return "http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions";
    }

    @Test
    void withOneInFlightAndNoRoomToQueueTheSecondRequestGets503QueueFullAndNeverReachesDecode() {
        java.util.concurrent.atomic.AtomicInteger reachedDecode = new java.util.concurrent.atomic.AtomicInteger();
        String uri = holdingProxy(1, 0, reachedDecode);
        HttpClient client = HttpClient.create();
        java.util.function.Supplier<Mono<String>> request = () -> client.post().uri(uri)
                .send(Mono.just(Unpooled.wrappedBuffer("{\"prompt\": \"a\"}".getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + res.responseHeaders().get("Retry-After") + " " + text));
        reactor.core.Disposable held = request.get().subscribe();
        awaitTrue(() -> reachedDecode.get() == 1);

        String second = request.get().block(WAIT);

        assertThat(second).startsWith("503 1 ").contains("proxy_queue_full").contains("--max-in-flight");
        assertThat(reachedDecode).as("only the request in flight reached decode").hasValue(1);
        held.dispose();
    }

    @Test
    void aRequestQueuedForAPlaceKeepsItsBodyInTheBodyBudgetUntilItEnds() {
        java.util.concurrent.atomic.AtomicInteger reachedDecode = new java.util.concurrent.atomic.AtomicInteger();
        String uri = holdingProxy(1, 4, reachedDecode);
        HttpClient client = HttpClient.create();
        java.util.function.Function<String, Mono<String>> request = body -> client.post().uri(uri)
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty(""));
        String inFlight = "{\"prompt\": \"a\"}";
        String queued = "{\"prompt\": \"a\", \"user\": \"" + "q".repeat(100_000) + "\"}";
        dev.kvflux.serving.http.BodyBudget budget = dev.kvflux.serving.http.BodyBudget.process();
        // the process's budget: an earlier test's body may still be on its way back (its answer ended as it closed)
        awaitTrue(() -> budget.reserved() == 0);

        reactor.core.Disposable held = request.apply(inFlight).subscribe();
        awaitTrue(() -> reachedDecode.get() == 1);
        reactor.core.Disposable waiting = request.apply(queued).subscribe();
        // the queued body is counted beside the one in flight
        awaitTrue(() -> budget.reserved() == inFlight.length() + queued.length());
        assertThat(reachedDecode).as("the queued request is not past the proxy").hasValue(1);

        waiting.dispose();
        awaitTrue(() -> budget.reserved() == inFlight.length()); // given back when it ends
        held.dispose();
        awaitTrue(() -> budget.reserved() == 0);
    }

    /**
     * Waits until {@code condition} holds, looking again every millisecond. It keeps no deadline of its own: a
     * condition that never comes fails the test at the suite's per-test timeout (junit-platform.properties).
     */
    private static void awaitTrue(java.util.function.BooleanSupplier condition) {
        while (!condition.getAsBoolean()) {
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
        }
    }

    @Test
    void decodeThatNeverAnswersGets504AtTheUpstreamTimeout() {
        prefill = recording(toPrefill, Flux.just("{\"choices\":[]}"));
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never()))
                .bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        registry.ping(instance(Role.DECODE, decode, 7002));
        proxy = ProxyServer.builder().registry(registry).upstreamTimeout(Duration.ofMillis(300)).bindNow();

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(answer).startsWith("504 ").contains("upstream_timeout");
    }

    @Test
    void proxyAnswers503WhenNoDecodeIsRegistered() {
        prefill = recording(toPrefill, Flux.just("{}"));
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefill, 7001));
        proxy = ProxyServer.builder().registry(registry).bindNow();

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(answer).startsWith("503 ").contains("no decode instance is registered");
    }

    @Test
    void bodyOverTheLimitIsRefusedAloneAndTheProxyKeepsServing() {
        proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(30))).bindNow();
        String huge = "{\"prompt\": \"" + "w ".repeat(HttpJson.MAX_BODY_BYTES / 2) + "\"}";

        String refused = post("/v1/completions", huge);
        String next = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(refused).startsWith("413 ").contains("body_too_large").contains("16 MiB limit");
        assertThat(next).startsWith("503 ");
    }

    @Test
    void registrationOnTheDiscoveryPortShowsInHealth() {
        proxy = ProxyServer.builder().discoveryPort(0).registry(new InstanceRegistry(Duration.ofSeconds(30))).bindNow();

        String registered = post(proxy.discoveryAddress(), "/register",
                "{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"127.0.0.1:8201\"}");
        String health = HttpClient.create().get().uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                .responseContent().aggregate().asString().block(WAIT);

        assertThat(registered).startsWith("200 ");
        assertThat(HttpJson.object(health).at("/decode/0/notify").asText()).isEqualTo("127.0.0.1:8201");
    }

    @Test
    void theClientPortAnswers404ToRegistrationsAndRegistersNothing() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry).bindNow();

        String answer = post("/register", "{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"127.0.0.1:8201\"}");

        assertThat(answer).startsWith("404 ");
        assertThat(registry.live(Role.DECODE)).isEmpty();
    }

    @Test
    void instanceThatStopsPingingIsDropped() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10), clock);
        Instance decodeInstance = new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", 8200),
                new InetSocketAddress("127.0.0.1", 8201));
        registry.ping(decodeInstance);
        clock.advanceTimeBy(Duration.ofSeconds(9));
        registry.ping(decodeInstance);
        clock.advanceTimeBy(Duration.ofSeconds(10));
        assertThat(registry.live(Role.DECODE)).containsExactly(decodeInstance);

        clock.advanceTimeBy(Duration.ofMillis(1));

        assertThat(registry.live(Role.DECODE)).isEmpty();
        assertThat(registry.pick(Role.DECODE)).isEmpty();
    }

    /** {@code count} copies of {@code body} sent at once; each answer as "status body", or "broken: error". */
    private java.util.List<String> postMany(int count, String body) {
        String uri = "http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions";
        HttpClient client = HttpClient.create(reactor.netty.resources.ConnectionProvider.create("test", 64));
        return Flux.range(0, count)
                .flatMap(i -> client.post().uri(uri)
                        .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                        .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                                .map(text -> res.status().code() + " " + text))
                        .onErrorResume(e -> Mono.just("broken: " + e)), 32)
                .collectList()
                .block(Duration.ofSeconds(60));
    }

    private static boolean wellFormedError(String answer, int status) {
        if (!answer.startsWith(status + " ")) {
            return false;
        }
        JsonNode body = HttpJson.object(answer.substring(4));
        return body.at("/error/message").isTextual() && body.at("/error/code").isTextual();
    }

    private DisposableServer answering(int status, String body, java.util.concurrent.atomic.AtomicInteger requests) {
        return answering(status, body, requests, Duration.ZERO);
    }

    /** A fake instance that answers every completion {@code status} with {@code body}, {@code after} its body came. */
    private DisposableServer answering(int status, String body, java.util.concurrent.atomic.AtomicInteger requests,
            Duration after) {
        return HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(Mono.delay(after)).then(Mono.defer(() -> {
                    requests.incrementAndGet();
                    return res.status(status).header("content-type", "application/json").sendString(Mono.just(body)).then();
                }))))
                .bindNow();
    }

    private void startProxyOver(DisposableServer prefillServer, DisposableServer decodeServer) {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, prefillServer, 7001));
        registry.ping(instance(Role.DECODE, decodeServer, 7002));
        proxy = ProxyServer.builder().registry(registry).bindNow();
    }

    @Test
    void twoHundredIdenticalInvalidRequestsGetTwoHundred400sAndNoneReachesAnInstance() {
        var reached = new java.util.concurrent.atomic.AtomicInteger();
        prefill = answering(400, "{\"error\":{\"message\":\"bad\",\"code\":\"bad_request\"}}", reached);
        decode = answering(400, "{\"error\":{\"message\":\"bad\",\"code\":\"bad_request\"}}", reached);
        startProxyOver(prefill, decode);

        java.util.List<String> answers = postMany(200, "{\"prompt\": 5}");

        assertThat(answers).hasSize(200).allSatisfy(a -> {
            assertThat(wellFormedError(a, 400)).as(a).isTrue();
            assertThat(a).contains("invalid_request").contains("prompt must be a string or a list of token ids");
        });
        assertThat(reached.get()).isZero();
    }

    @Test
    void whenBothInstancesRefuseAValidRequestEachClientGetsExactlyOneWholeAnswer() {
        var reached = new java.util.concurrent.atomic.AtomicInteger();
        String refusal = "{\"error\":{\"message\":\"refused\",\"code\":\"bad_request\"}}";
        // prefill refuses a little later than decode, so that decode's refusal is the first the proxy sees
        prefill = answering(400, refusal, reached, Duration.ofMillis(200));
        decode = answering(400, refusal, reached);
        startProxyOver(prefill, decode);

        java.util.List<String> answers = postMany(200, "{\"prompt\": \"a b\"}");

        // decode's own 400 when its answer came first, else a 502 (prefill's failure, or decode's connection
        // closed under it when an earlier request was cancelled): never both, never cut
        assertThat(answers).hasSize(200).allSatisfy(a -> assertThat(wellFormedError(a, 400)
                || wellFormedError(a, 502)).as(a).isTrue());
        assertThat(answers).anySatisfy(a -> assertThat(a).startsWith("400 ").contains("refused"));
    }

    @Test
    void decodeClosingWithoutAnAnswerGetsOneWhole502() {
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never())).bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .doOnConnection(c -> c.addHandlerFirst("close-at-once", new io.netty.channel.ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(io.netty.channel.ChannelHandlerContext ctx, Object msg) {
                        io.netty.util.ReferenceCountUtil.release(msg);
                        ctx.close();
                    }
                }))
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never()))
                .bindNow();
        startProxyOver(prefill, decode);

        java.util.List<String> answers = postMany(20, "{\"prompt\": \"a\"}");

        assertThat(answers).hasSize(20).allSatisfy(a ->
                assertThat(wellFormedError(a, 502) && a.contains("decode_unreachable")).as(a).isTrue());
    }

    @Test
    void prefillFailingAfterDecodesAnswerStartedLeavesDecodesAnswerWhole() {
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(Mono.delay(Duration.ofMillis(100)))
                        .then(res.status(500).sendString(Mono.just("{\"error\":{}}")).then())))
                .bindNow();
        decode = recording(toDecode, Flux.just("data: {\"a\":1}\n\n").concatWith(
                Mono.delay(Duration.ofMillis(300)).thenReturn("data: [DONE]\n\n")));
        startProxyOver(prefill, decode);

        String answer = post("/v1/completions", "{\"prompt\": \"a\", \"stream\": true}");

        assertThat(answer).isEqualTo("200 data: {\"a\":1}\n\ndata: [DONE]\n\n");
    }

    @Test
    void prefillFailingFirstCancelsDecodeAndGetsOneWhole502() throws Exception {
        java.util.concurrent.CountDownLatch decodeCancelled = new java.util.concurrent.CountDownLatch(1);
        var reached = new java.util.concurrent.atomic.AtomicInteger();
        prefill = answering(500, "{\"error\":{\"message\":\"engine gone\nFAKE\"}}", reached);
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never()
                        .doOnCancel(decodeCancelled::countDown).then()))
                .bindNow();
        startProxyOver(prefill, decode);

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(wellFormedError(answer, 502)).as(answer).isTrue();
        assertThat(answer).contains("prefill_failed").contains("engine gone");
        assertThat(HttpJson.object(answer.substring(4)).at("/error/message").asText())
                .as("prefill's line break is escaped").contains("engine gone\\nFAKE").doesNotContain("\n");
        assertThat(decodeCancelled.await(5, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void prefillFailingWithAnEndlessBodyGetsA502WithoutTheProxyReadingItAll() {
        // the proxy used to aggregate prefill's whole answer before looking at it: a 400 MB error body took
        // its RSS from 103 MB to 1.3 GB, and an endless one was read until the upstream timeout
        var served = new java.util.concurrent.atomic.AtomicLong();
        byte[] chunk = "engine gone ".repeat(700).getBytes(StandardCharsets.UTF_8);
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(Mono.defer(() -> res.status(500)
                        .header("content-type", "application/json")
                        .send(Flux.<io.netty.buffer.ByteBuf>generate(sink -> sink.next(Unpooled.wrappedBuffer(chunk)))
                                .doOnNext(b -> served.addAndGet(chunk.length)))
                        .then()))))
                .bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never().then()))
                .bindNow();
        startProxyOver(prefill, decode);

        String answer = post("/v1/completions", "{\"prompt\": \"a\"}");

        assertThat(wellFormedError(answer, 502)).as(answer).isTrue();
        assertThat(answer).contains("prefill_failed").contains("500 engine gone");
        assertThat(served.get()).as("bytes prefill got to send").isLessThan(64L << 20);
    }
}
