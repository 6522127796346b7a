package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import dev.kvflux.transfer.notify.Traceparent;
import io.micrometer.observation.ObservationRegistry;
import io.netty.buffer.Unpooled;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

/**
 * One trace per transfer: proxy, prefill and decode in one JVM, each with its own observation registry over
 * one OpenTelemetry SDK whose spans are kept in memory, and one completion sent through the proxy.
 */
class TransferTraceTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final Set<String> ALL_SPANS = Set.of("kvflux.proxy.completion", "kvflux.proxy.prefill",
            "kvflux.proxy.decode", "kvflux.prefill.request", "kvflux.prefill.queue", "kvflux.prefill.post",
            "kvflux.prefill.wait", "kvflux.notify.send", "kvflux.notify.receive", "kvflux.decode.request",
            "kvflux.decode.receive", "kvflux.decode.generate");
    private static final String CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
    private static final String CLIENT_SPAN = "00f067aa0ba902b7";

    private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
    private OpenTelemetrySdk otel;

    @BeforeEach
    void sdk() {
        otel = OpenTelemetrySdk.builder()
                .setTracerProvider(SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter))
                        .build())
                .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
                .build();
    }

    @AfterEach
    void closeSdk() {
        otel.close();
    }

    /** Runs one completion through proxy, prefill and decode, with these registries; its HTTP status. */
    private int complete(ObservationRegistry proxyObservations, ObservationRegistry prefillObservations,
            ObservationRegistry decodeObservations, String clientTraceparent) {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(5))
                     .observationRegistry(decodeObservations).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .transferTimeout(Duration.ofSeconds(2)).observationRegistry(prefillObservations).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).observationRegistry(proxyObservations)
                     .bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            String body = "{\"prompt\": \"a b c d\", \"max_tokens\": 2}";
            Integer status = HttpClient.create()
                    .headers(h -> {
                        if (clientTraceparent != null) {
                            h.set("traceparent", clientTraceparent);
                        }
                    })
                    .post().uri("http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions")
                    .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                    .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                            .thenReturn(res.status().code()))
                    .block(Duration.ofSeconds(10));
            // spans end as their steps do, some (the notice's, the requests') just after the answer
            boolean traced = !proxyObservations.isNoop();
            await(() -> decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_DONE) == 1 && (!traced || spansByName().keySet().containsAll(ALL_SPANS)));
            return status;
        }
    }

    private static void await(BooleanSupplier condition) {
        for (int i = 0; i < 500 && !condition.getAsBoolean(); i++) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private Map<String, SpanData> spansByName() {
        return exporter.getFinishedSpanItems().stream()
                .collect(Collectors.toMap(SpanData::getName, Function.identity(), (first, second) -> first));
    }

    private static void assertParent(Map<String, SpanData> spans, String child, String parent) {
        assertThat(spans.get(child).getParentSpanId()).as("%s's parent is %s", child, parent)
                .isEqualTo(spans.get(parent).getSpanId());
    }

    @Test
    void oneCompletionIsOneTraceAcrossProxyPrefillAndDecodeWithTheExpectedParents() {
        int status = complete(Tracing.registry(otel, "kvflux-proxy"), Tracing.registry(otel, "kvflux-prefill"),
                Tracing.registry(otel, "kvflux-decode"), null);

        assertThat(status).isEqualTo(200);
        List<SpanData> finished = exporter.getFinishedSpanItems();
        assertThat(finished).extracting(SpanData::getName).containsExactlyInAnyOrderElementsOf(ALL_SPANS);
        assertThat(finished).extracting(SpanData::getTraceId).as("one trace id").containsOnly(
                finished.getFirst().getTraceId());
        assertThat(finished.stream().map(s -> s.getInstrumentationScopeInfo().getName()).distinct())
                .as("spans from all three roles").containsExactlyInAnyOrder("kvflux-proxy", "kvflux-prefill",
                        "kvflux-decode");
        Map<String, SpanData> spans = spansByName();
        assertThat(spans.get("kvflux.proxy.completion").getParentSpanContext().isValid()).as("the root").isFalse();
        assertParent(spans, "kvflux.proxy.prefill", "kvflux.proxy.completion");
        assertParent(spans, "kvflux.proxy.decode", "kvflux.proxy.completion");
        assertParent(spans, "kvflux.prefill.request", "kvflux.proxy.prefill");
        for (String step : List.of("kvflux.prefill.queue", "kvflux.prefill.post", "kvflux.prefill.wait",
                "kvflux.notify.send")) {
            assertParent(spans, step, "kvflux.prefill.request");
        }
        assertParent(spans, "kvflux.notify.receive", "kvflux.notify.send");
        assertParent(spans, "kvflux.decode.request", "kvflux.proxy.decode");
        assertParent(spans, "kvflux.decode.receive", "kvflux.decode.request");
        assertParent(spans, "kvflux.decode.generate", "kvflux.decode.request");
        assertThat(spans.get("kvflux.proxy.prefill").getKind()).isEqualTo(SpanKind.CLIENT);
        assertThat(spans.get("kvflux.prefill.request").getKind()).isEqualTo(SpanKind.SERVER);
        assertThat(spans.get("kvflux.notify.send").getKind()).isEqualTo(SpanKind.PRODUCER);
        assertThat(spans.get("kvflux.notify.receive").getKind()).isEqualTo(SpanKind.CONSUMER);
        String transferId = spans.get("kvflux.proxy.completion").getAttributes().asMap().entrySet().stream()
                .filter(e -> e.getKey().getKey().equals("kvflux.transfer_id")).map(e -> e.getValue().toString())
                .findFirst().orElseThrow();
        assertThat(finished).as("every span names the transfer").allSatisfy(s -> assertThat(
                s.getAttributes().asMap().values()).contains(transferId));
    }

    @Test
    void aClientsTraceparentIsContinuedByTheProxy() {
        int status = complete(Tracing.registry(otel, "kvflux-proxy"), Tracing.registry(otel, "kvflux-prefill"),
                Tracing.registry(otel, "kvflux-decode"), "00-" + CLIENT_TRACE + "-" + CLIENT_SPAN + "-01");

        assertThat(status).isEqualTo(200);
        assertThat(exporter.getFinishedSpanItems()).extracting(SpanData::getTraceId).containsOnly(CLIENT_TRACE);
        assertThat(spansByName().get("kvflux.proxy.completion").getParentSpanId()).isEqualTo(CLIENT_SPAN);
    }

    @Test
    void aMalformedClientTraceparentIsIgnoredAndTheProxyStartsTheTrace() {
        int status = complete(Tracing.registry(otel, "kvflux-proxy"), Tracing.registry(otel, "kvflux-prefill"),
                Tracing.registry(otel, "kvflux-decode"), "00-" + CLIENT_TRACE + "-" + CLIENT_SPAN + "-01-" + "x".repeat(300));

        assertThat(status).isEqualTo(200);
        SpanData root = spansByName().get("kvflux.proxy.completion");
        assertThat(root.getParentSpanContext().isValid()).isFalse();
        assertThat(root.getTraceId()).isNotEqualTo(CLIENT_TRACE);
    }

    @Test
    void withTheDefaultRegistriesNothingIsExportedEvenForATracedClient() {
        int status = complete(ObservationRegistry.NOOP, ObservationRegistry.NOOP, ObservationRegistry.NOOP,
                "00-" + CLIENT_TRACE + "-" + CLIENT_SPAN + "-01");

        assertThat(status).isEqualTo(200);
        assertThat(exporter.getFinishedSpanItems()).isEmpty();
    }

    /**
     * The {@code traceparent} header (or "none") that fake prefill and decode instances get from a proxy with
     * {@code observations}, for a client that sent {@code clientTraceparent}.
     */
    private static Map<String, String> forwardedTraceparents(ObservationRegistry observations,
            String clientTraceparent) {
        Map<String, String> seen = new java.util.concurrent.ConcurrentHashMap<>();
        Function<String, DisposableServer> instance = role -> HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(Mono.defer(() -> {
                    seen.put(role, req.requestHeaders().get("traceparent", "none"));
                    return res.header("content-type", "application/json").sendString(Mono.just("{}")).then();
                })))).bindNow();
        DisposableServer prefill = instance.apply("prefill");
        DisposableServer decode = instance.apply("decode");
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(new Instance(Role.PREFILL, new InetSocketAddress("127.0.0.1", prefill.port()),
                new InetSocketAddress("127.0.0.1", 9)));
        registry.ping(new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", decode.port()),
                new InetSocketAddress("127.0.0.1", 10)));
        try (ProxyServer proxy = ProxyServer.builder().registry(registry).observationRegistry(observations).bindNow()) {
            HttpClient.create().headers(h -> h.set("traceparent", clientTraceparent))
                    .post().uri("http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions")
                    .send(Mono.just(Unpooled.wrappedBuffer("{\"prompt\": \"a b\", \"max_tokens\": 2}"
                            .getBytes(StandardCharsets.UTF_8))))
                    .responseSingle((res, content) -> content.asString().defaultIfEmpty(""))
                    .block(Duration.ofSeconds(5));
            await(() -> seen.size() == 2);
            return Map.copyOf(seen);
        } finally {
            prefill.disposeNow();
            decode.disposeNow();
        }
    }

    @Test
    void aTracingProxySendsEachInstanceTheTraceparentOfItsCallSpanAndADefaultOneSendsNone() {
        String client = "00-" + CLIENT_TRACE + "-" + CLIENT_SPAN + "-01";

        Map<String, String> untraced = forwardedTraceparents(ObservationRegistry.NOOP, client);
        Map<String, String> traced = forwardedTraceparents(Tracing.registry(otel, "kvflux-proxy"), client);

        assertThat(untraced).containsOnly(Map.entry("prefill", "none"), Map.entry("decode", "none"));
        await(() -> spansByName().containsKey("kvflux.proxy.prefill") && spansByName().containsKey("kvflux.proxy.decode"));
        Map<String, SpanData> spans = spansByName();
        assertThat(traced).containsOnly(
                Map.entry("prefill", "00-" + CLIENT_TRACE + "-" + spans.get("kvflux.proxy.prefill").getSpanId() + "-01"),
                Map.entry("decode", "00-" + CLIENT_TRACE + "-" + spans.get("kvflux.proxy.decode").getSpanId() + "-01"));
    }

    /** Prefill's outcome for {@code id}, as a fake decode's notify server receives it. */
    private static NotifyMessage outcomeFrom(ObservationRegistry prefillObservations, String id) throws Exception {
        List<NotifyMessage> received = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = NotifyServer.builder().handler(received::add).bind().block(Duration.ofSeconds(5));
             NotifyClient asDecode = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .observationRegistry(prefillObservations).bindNow()) {
            String body = "{\"prompt\": \"a b c\", \"max_tokens\": 2, \"kv_transfer_params\": {\"transfer_id\": \""
                    + id + "\", \"remote_notify\": \"127.0.0.1:" + decode.address().getPort() + "\"}}";
            Mono<String> answer = HttpClient.create()
                    .headers(h -> h.set("traceparent", "00-" + CLIENT_TRACE + "-" + CLIENT_SPAN + "-01"))
                    .post().uri("http://127.0.0.1:" + prefill.httpAddress().getPort() + "/v1/completions")
                    .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                    .responseSingle((res, content) -> content.asString());
            assertThat(answer.block(Duration.ofSeconds(5))).contains("text_completion");
            asDecode.send(prefill.notifyAddress(), DescribedDecode.blocks(SMALL, id, List.of(1L)),
                    Duration.ofSeconds(5)).block();
            await(() -> received.stream().anyMatch(m -> m instanceof NotifyMessage.WriteDone));
            return received.stream().filter(m -> m instanceof NotifyMessage.WriteDone).findFirst().orElseThrow();
        }
    }

    @Test
    void aTracedPrefillsNoticeCarriesTheTraceparentOfItsSendSpan() throws Exception {
        NotifyMessage done = outcomeFrom(Tracing.registry(otel, "kvflux-prefill"), "traced-notice");

        assertThat(Traceparent.isValid(done.traceparent())).as(done.traceparent()).isTrue();
        await(() -> spansByName().containsKey("kvflux.notify.send"));
        SpanData send = spansByName().get("kvflux.notify.send");
        assertThat(done.traceparent()).isEqualTo("00-" + CLIENT_TRACE + "-" + send.getSpanId() + "-01");
    }

    @Test
    void withTheDefaultRegistryNoTraceparentIsSentInTheNotice() throws Exception {
        NotifyMessage done = outcomeFrom(ObservationRegistry.NOOP, "untraced-notice");

        assertThat(done.traceparent()).isNull();
        assertThat(exporter.getFinishedSpanItems()).isEmpty();
    }
}
