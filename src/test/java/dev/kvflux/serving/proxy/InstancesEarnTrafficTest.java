package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.tools.bench.Blackhole;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * The proxy sends traffic only to instances that answer: a decode that takes connections and never answers is
 * ejected by its failed health checks, one that answers its health check but holds requests is cut off by the
 * first-byte bound, and a request over the model length never reaches an instance.
 */
class InstancesEarnTrafficTest {
    private final List<AutoCloseable> open = new ArrayList<>();
    private final AtomicInteger decodeCalls = new AtomicInteger();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private DisposableServer answering(String body, AtomicInteger calls) {
        DisposableServer server = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("{\"status\":\"ok\"}")))
                        .post("/v1/completions", (req, res) -> req.receive().then(Mono.defer(() -> {
                            calls.incrementAndGet();
                            return res.header("content-type", "application/json").sendString(Mono.just(body)).then();
                        }))))
                .bindNow();
        open.add(server::disposeNow);
        return server;
    }

    /** A server that accepts connections and never answers anything, as a blackholed instance does. */
    private InetSocketAddress blackhole() throws IOException {
        Blackhole hole = Blackhole.open(200);
        open.add(hole);
        return hole.address();
    }

    private static Instance instance(Role role, InetSocketAddress http, int notifyPort) {
        return new Instance(role, http, new InetSocketAddress("127.0.0.1", notifyPort));
    }

    private static InetSocketAddress at(DisposableServer server) {
        return new InetSocketAddress("127.0.0.1", ((InetSocketAddress) server.address()).getPort());
    }

    private String complete(ProxyServer proxy) {
        return ProxyServerTest.post(proxy.address(), "/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 2}");
    }

    @Test
    void blackholeDecodesAreEjectedByTheirHealthChecksAndTheLiveOneTakesTheTraffic() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, at(answering("{}", new AtomicInteger())), 7001));
        registry.ping(instance(Role.DECODE, at(answering("{\"choices\": []}", decodeCalls)), 7002));
        for (int i = 0; i < 4; i++) {
            registry.ping(instance(Role.DECODE, blackhole(), 7100 + i));
        }
        InstanceHealth health = InstanceHealth.defaults();
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofMillis(100), health)
                .firstByteTimeout(Duration.ofSeconds(2)).bindNow();
        open.add(proxy);

        long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (health.ejected() < 4 && System.nanoTime() < until) {
            Thread.sleep(20);
        }
        assertThat(health.ejected()).as("the four blackholes").isEqualTo(4);
        String listed = reactor.netty.http.client.HttpClient.create().get()
                .uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                .responseContent().aggregate().asString().block(Duration.ofSeconds(10));
        JsonNode decodes = HttpJson.MAPPER.readTree(listed).get("decode");
        assertThat(decodes).hasSize(5);
        assertThat(decodes).filteredOn(d -> d.get("ejected").asBoolean()).as("ejected in /health").hasSize(4);
        List<String> answers = Flux.range(0, 20).map(i -> complete(proxy)).collectList().block();

        assertThat(answers).allSatisfy(a -> assertThat(a).startsWith("200 "));
        assertThat(decodeCalls).hasValue(20);
    }

    @Test
    void aDecodeThatAnswersItsHealthCheckButHoldsRequestsIsCutOffAtTheFirstByteBoundAndEjectedByACanary()
            throws Exception {
        DisposableServer holding = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("{}")))
                        .post("/v1/completions", (req, res) -> Mono.never()))
                .bindNow();
        open.add(holding::disposeNow);
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, at(answering("{}", new AtomicInteger())), 7001));
        Instance held = instance(Role.DECODE, at(holding), 7002);
        registry.ping(held);
        InstanceHealth health = new InstanceHealth(2, 3, Duration.ofMinutes(1), System::nanoTime);
        ProxyServer proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofSeconds(10), health)
                .firstByteTimeout(Duration.ofMillis(300)).canaryTimeout(Duration.ofMillis(300)).bindNow();
        open.add(proxy);

        String answer = complete(proxy);
        long until = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (health.usable(held) && System.nanoTime() < until) {
            Thread.sleep(20);
        }

        assertThat(answer).startsWith("504 ").contains("first-byte timeout");
        assertThat(health.usable(held)).as("the canary sent after the timeout got no answer either").isFalse();
    }

    @Test
    void aRequestOverTheModelLengthIsRefusedBeforeAnyInstanceSeesIt() {
        AtomicInteger prefillCalls = new AtomicInteger();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, at(answering("{}", prefillCalls)), 7001));
        registry.ping(instance(Role.DECODE, at(answering("{}", decodeCalls)), 7002));
        ProxyServer proxy = ProxyServer.builder().registry(registry).maxModelLen(100).bindNow();
        open.add(proxy);

        String huge = ProxyServerTest.post(proxy.address(), "/v1/completions", "{\"prompt\": \""
                + "w ".repeat(99) + "\", \"max_tokens\": 2}");

        assertThat(huge).startsWith("400 ").contains("context_length_exceeded").contains("model length of 100");
        assertThat(prefillCalls).hasValue(0);
        assertThat(decodeCalls).hasValue(0);
    }

    @Test
    void aBodyFarOverTheModelLengthIsRefusedBeforeTheRestOfItIsSent() throws IOException {
        AtomicInteger prefillCalls = new AtomicInteger();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(instance(Role.PREFILL, at(answering("{}", prefillCalls)), 7001));
        registry.ping(instance(Role.DECODE, at(answering("{}", decodeCalls)), 7002));
        ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow();
        open.add(proxy);

        // 16 MiB declared, 3 MiB of a prompt of words sent, and the rest held back while the answer is read
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", proxy.address().getPort())) {
            socket.setSoTimeout(10_000);
            java.io.OutputStream out = socket.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + (16 << 20) + "\r\n\r\n{\"prompt\": \"").getBytes(
                    java.nio.charset.StandardCharsets.US_ASCII));
            out.write("w ".repeat(3 << 19).getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            out.flush();
            byte[] head = socket.getInputStream().readNBytes(512);
            String answer = new String(head, java.nio.charset.StandardCharsets.ISO_8859_1);

            assertThat(answer).startsWith("HTTP/1.1 400 ").contains("context_length_exceeded");
        }
        assertThat(prefillCalls).hasValue(0);
        assertThat(decodeCalls).hasValue(0);
    }

    @Test
    void aProxyOnANonLoopbackAddressWithoutASecretRefusesToStart() {
        assertThatThrownBy(() -> ProxyServer.builder().host("0.0.0.0")
                .registry(new InstanceRegistry(Duration.ofSeconds(30))).bindNow())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("not a loopback address")
                .hasMessageContaining("secret");
    }
}
