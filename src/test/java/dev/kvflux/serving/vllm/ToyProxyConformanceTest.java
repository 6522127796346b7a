package dev.kvflux.serving.vllm;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Role;
import dev.kvflux.tools.vllm.ToyProxy;
import dev.kvflux.tools.vllm.VllmDouble;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.KvMode;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/**
 * kvflux's proxy sends vLLM's instances what vLLM's own MoRIIO proxy sends them. The same client requests go
 * through vLLM's toy proxy (the pinned, unmodified file, run on Debian's Python packages) and through kvflux's, each in
 * front of its own instance doubles that register over ZeroMQ as vLLM's connector does; what the doubles received is
 * compared field by field: path, request id (its random part masked), data-parallel rank, every
 * {@code kv_transfer_params} field (the transfer id's random part masked), {@code max_tokens},
 * {@code max_completion_tokens} and {@code stream}. In WRITE and READ, DP 1 and 2, completions and chat, streamed
 * and not.
 */
// real processes (role JVMs, etcd, a Python proxy) start and stop in each test, which takes minutes on a loaded
// 2-core host; the claims are about what ended how, not how soon, so the bound is only a guard against a hang
@org.junit.jupiter.api.Timeout(value = 5, unit = java.util.concurrent.TimeUnit.MINUTES)
class ToyProxyConformanceTest {
    private static final Duration WAIT = Duration.ofSeconds(20);

    @TempDir
    static Path work;

    @BeforeAll
    static void toyProxyCanRun() {
        String why = ToyProxy.unavailable();
        Assumptions.assumeTrue(why == null, () -> "vLLM's toy proxy cannot run here: " + why);
    }

    static Stream<Arguments> deployments() {
        return Stream.of(Arguments.of(KvMode.WRITE, 1), Arguments.of(KvMode.WRITE, 2), Arguments.of(KvMode.READ, 1),
                Arguments.of(KvMode.READ, 2));
    }

    /** The client requests of one case set: completions and chat, streamed and not. */
    private static List<String[]> requests() {
        return List.of(
                new String[] {"/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 5}"},
                new String[] {"/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 4, \"stream\": true,"
                        + " \"stream_options\": {\"include_usage\": true}}"},
                new String[] {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],"
                        + " \"max_tokens\": 3}"},
                new String[] {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],"
                        + " \"max_tokens\": 6, \"max_completion_tokens\": 6, \"stream\": true}"});
    }

    @ParameterizedTest(name = "{0}, DP {1}")
    @MethodSource("deployments")
    void kvfluxsProxySendsTheInstancesWhatVllmsProxySends(KvMode mode, int dp) throws Exception {
        List<List<String>> throughToy;
        try (ToyProxy toy = ToyProxy.start(work)) {
            throughToy = through("127.0.0.1:" + ToyProxy.DISCOVERY_PORT, toy.port(), mode, dp, toy::registered);
        }
        List<List<String>> throughKvflux;
        int vllmPort;
        try (java.net.ServerSocket free = new java.net.ServerSocket(0)) {
            vllmPort = free.getLocalPort();
        }
        try (ProxyServer proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(10)))
                .vllmDiscovery(new InetSocketAddress("127.0.0.1", vllmPort), Networks.LOOPBACK).bindNow()) {
            int port = proxy.address().getPort();
            throughKvflux = through("127.0.0.1:" + vllmPort, port, mode, dp, () -> {
                try {
                    com.fasterxml.jackson.databind.JsonNode health = dev.kvflux.serving.http.HttpJson.MAPPER
                            .readTree(get(port, "/health"));
                    return health.path("prefill").size() > 0 && health.path("decode").size() > 0;
                } catch (java.io.IOException e) {
                    return false;
                }
            });
        }

        assertThat(throughKvflux).as("what the instances received through kvflux's proxy, against vLLM's")
                .isEqualTo(throughToy);
        assertThat(throughToy).as("requests received, per instance").allSatisfy(l -> assertThat(l).isNotEmpty());
    }

    /**
     * Starts a prefill and a decode double of {@code dp} ranks registering at {@code discovery}, sends the case set
     * through the proxy at {@code port}, and returns what each double received, masked, prefill's then decode's.
     */
    private static List<List<String>> through(String discovery, int port, KvMode mode, int dp,
            java.util.function.BooleanSupplier registered) throws Exception {
        try (VllmDouble prefill = VllmDouble.start(Role.PREFILL, mode, dp, 16301, 16401);
             VllmDouble decode = VllmDouble.start(Role.DECODE, mode, dp, 16501, 16601)) {
            // decode answers 100 ms late, as a decode waits for its KV: prefill's legs then arrive in order
            decode.answerDelayMillis.set(100);
            prefill.registerWith(discovery, Duration.ofMillis(200));
            decode.registerWith(discovery, Duration.ofMillis(200));
            awaitServing(port, registered);
            Thread.sleep(300);
            int before = prefill.received().size();
            int beforeDecode = decode.received().size();
            for (String[] request : requests()) {
                String answer = post(port, request[0], request[1]);
                assertThat(answer).as(request[0] + " " + request[1]).startsWith("200 ");
            }
            long until = System.nanoTime() + WAIT.toNanos();
            while (prefill.received().size() - before < requests().size() && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            return List.of(masked(prefill.received().subList(before, prefill.received().size())),
                    masked(decode.received().subList(beforeDecode, decode.received().size())));
        }
    }

    /**
     * Waits until the proxy has both doubles ({@code registered}; they ping every 200 ms), then sends one request,
     * which must be served: vLLM's proxy counts every request it is sent, served or not, in its walk over the
     * data-parallel ranks, so no request may be sent before, and both proxies are sent the very same ones from here.
     */
    private static void awaitServing(int port, java.util.function.BooleanSupplier registered)
            throws InterruptedException {
        long until = System.nanoTime() + WAIT.toNanos();
        while (!registered.getAsBoolean() && System.nanoTime() < until) {
            Thread.sleep(50);
        }
        Thread.sleep(500); // every rank's registration, not only the first
        String probe = post(port, "/v1/completions", "{\"prompt\": \"warm\", \"max_tokens\": 2}");
        assertThat(probe).as("the first request, once both doubles have registered").startsWith("200 ");
    }

    private static String get(int port, String path) {
        return HttpClient.create().get().uri("http://127.0.0.1:" + port + path).responseContent().aggregate()
                .asString().defaultIfEmpty("").onErrorReturn("").block(WAIT);
    }

    private static String post(int port, String path, String body) {
        return HttpClient.create().headers(h -> h.set("content-type", "application/json")).post()
                .uri("http://127.0.0.1:" + port + path)
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .onErrorResume(e -> Mono.just("error " + e))
                .block(WAIT);
    }

    /** Each request as the compared fields, with the random parts of its ids masked. */
    private static List<String> masked(List<VllmDouble.Received> received) {
        List<String> out = new ArrayList<>();
        for (VllmDouble.Received r : received) {
            ObjectNode fields = HttpJson.MAPPER.createObjectNode();
            fields.put("path", r.path());
            fields.put("request_id", r.requestId() == null ? null : r.requestId().replaceAll("_[0-9a-f]{32}$", "_*"));
            fields.put("dp_rank", r.dpRank());
            JsonNode kv = r.body().path("kv_transfer_params");
            ObjectNode kvMasked = fields.putObject("kv_transfer_params");
            kv.properties().stream().sorted(java.util.Map.Entry.comparingByKey()).forEach(e -> kvMasked.set(e.getKey(),
                    e.getKey().equals("transfer_id") ? HttpJson.MAPPER.getNodeFactory().textNode(
                            e.getValue().asText().replaceAll("^tx-[0-9a-f-]+$", "tx-*")) : e.getValue()));
            for (String key : new String[] {"max_tokens", "max_completion_tokens", "stream", "stream_options"}) {
                fields.set(key, r.body().get(key));
            }
            out.add(HttpJson.write(fields));
        }
        return out;
    }
}
