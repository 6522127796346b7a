package dev.kvflux.serving.vllm;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.tools.vllm.ToyProxy;
import dev.kvflux.tools.vllm.VllmDouble;
import dev.kvflux.transfer.KvMode;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * kvflux's roles behind a vLLM-style proxy: they register over ZeroMQ as vLLM's connector does
 * ({@code registerWithVllmProxy}), take its unsigned requests in vLLM's shape from loopback, and move the KV between
 * them with kvflux's own notifications, decode checking every request's KV. Behind vLLM's own toy proxy (where it can
 * run) and behind kvflux's proxy taking vLLM registrations: completions and chat, streamed and not, then 200 requests
 * at concurrency 16.
 */
// real processes (role JVMs, etcd, a Python proxy) start and stop in each test, which takes minutes on a loaded
// 2-core host; the claims are about what ended how, not how soon, so the bound is only a guard against a hang
@org.junit.jupiter.api.Timeout(value = 5, unit = java.util.concurrent.TimeUnit.MINUTES)
class RolesBehindVllmProxyTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(2), 16,
            64);

    @TempDir
    static Path work;

    static Stream<Arguments> cases() {
        return Stream.of(Arguments.of("toy", KvMode.WRITE), Arguments.of("toy", KvMode.READ),
                Arguments.of("kvflux", KvMode.WRITE), Arguments.of("kvflux", KvMode.READ));
    }

    @ParameterizedTest(name = "behind the {0} proxy, {1}")
    @MethodSource("cases")
    void kvfluxsRolesServeEveryRequestBehindAVllmStyleProxy(String proxyKind, KvMode mode) throws Exception {
        if (proxyKind.equals("toy")) {
            String why = ToyProxy.unavailable();
            org.junit.jupiter.api.Assumptions.assumeTrue(why == null, () -> "vLLM's toy proxy cannot run here: " + why);
        }
        try (Stack stack = Stack.start(proxyKind, mode, work)) {
            Front front = stack.front();
            DecodeServer decode = stack.decode();

            List<String[]> set = List.of(
                    new String[] {"/v1/completions", "{\"prompt\": \"a b c d\", \"max_tokens\": 5}"},
                    new String[] {"/v1/completions", "{\"prompt\": \"a b c d\", \"max_tokens\": 5, \"stream\": true}"},
                    new String[] {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\":"
                            + " \"a b c\"}], \"max_tokens\": 4}"},
                    new String[] {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\":"
                            + " \"a b c\"}], \"max_tokens\": 4, \"stream\": true}"});
            HttpClient client = HttpClient.create(ConnectionProvider.create("behind-vllm", 32));
            for (String[] request : set) {
                assertThat(post(client, front.port(), request[0], request[1])).as(request[0] + " " + request[1])
                        .startsWith("200 ").doesNotContain("\"error\"");
            }
            List<String> load = Flux.range(0, 200).flatMap(i -> Mono.fromCallable(() -> post(client, front.port(),
                            "/v1/completions", "{\"prompt\": \"w" + i + " x y\", \"max_tokens\": 3}"))
                            .subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic()), 16)
                    .collectList().block(Duration.ofMinutes(2));

            assertThat(load).hasSize(200).allSatisfy(a -> assertThat(a).startsWith("200 "));
            assertThat(decode.notifyMeters().count(dev.kvflux.transfer.notify.NotifyEvent.RECEIVED))
                    .as("notifications decode took from prefill (write_done, or read_ready)")
                    .isGreaterThanOrEqualTo(204);
        }
    }

    private static String post(HttpClient client, int port, String path, String body) {
        return client.headers(h -> h.set("content-type", "application/json")).post()
                .uri("http://127.0.0.1:" + port + path)
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    /** kvflux's roles on the simulated engine behind a vLLM-style proxy, both registered with it. */
    record Stack(Front front, SimulatedXgmiEngine engine, DecodeServer decode, PrefillServer prefill)
            implements AutoCloseable {
        /** The {@code proxyKind} proxy ({@code toy} or {@code kvflux}) and the roles in {@code mode}, registered. */
        static Stack start(String proxyKind, KvMode mode, Path work) throws Exception {
            Front front = Front.start(proxyKind, work);
            SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
            DecodeServer decode = DecodeServer.builder().model(SMALL).kvMode(mode)
                    .receiveDeadline(Duration.ofSeconds(10)).unsignedFrom(Networks.LOOPBACK::contains).bindNow();
            PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine).kvMode(mode)
                    .unsignedFrom(Networks.LOOPBACK::contains).bindNow();
            Stack stack = new Stack(front, engine, decode, prefill);
            decode.registerWithVllmProxy(front.discovery(), mode);
            prefill.registerWithVllmProxy(front.discovery(), mode);
            // both registered (they ping every 3 s, the first at once), however long the first ping takes on a
            // loaded host: kvflux's proxy lists its instances in /health; the toy proxy logs each one
            long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!front.registered() && System.nanoTime() < until) {
                Thread.sleep(50);
            }
            if (!front.registered()) {
                stack.close();
                throw new AssertionError("prefill and decode did not both register with the " + proxyKind
                        + " proxy within 60 s");
            }
            return stack;
        }

        @Override
        public void close() throws Exception {
            try (front; engine; decode; prefill) {
                // closed in reverse: prefill, decode, the engine, then the proxy
            }
        }
    }

    /** The proxy in front: vLLM's toy proxy, or kvflux's taking vLLM registrations. */
    record Front(AutoCloseable server, int port, String discovery) implements AutoCloseable {
        static Front start(String kind, Path work) throws Exception {
            if (kind.equals("toy")) {
                ToyProxy toy = ToyProxy.start(work);
                return new Front(toy, toy.port(), "127.0.0.1:" + ToyProxy.DISCOVERY_PORT);
            }
            int vllmPort;
            try (java.net.ServerSocket free = new java.net.ServerSocket(0)) {
                vllmPort = free.getLocalPort();
            }
            ProxyServer proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(10)))
                    .vllmDiscovery(new InetSocketAddress("127.0.0.1", vllmPort), Networks.LOOPBACK).bindNow();
            return new Front(proxy, proxy.address().getPort(), "127.0.0.1:" + vllmPort);
        }

        /** Whether the proxy has taken both a prefill's and a decode's registration. */
        boolean registered() {
            try {
                if (server instanceof ToyProxy toy) {
                    return toy.registered();
                }
                String health = HttpClient.create().get()
                        .uri("http://127.0.0.1:" + port + "/health").responseContent().aggregate().asString()
                        .defaultIfEmpty("").onErrorReturn("").block(Duration.ofSeconds(10));
                com.fasterxml.jackson.databind.JsonNode listed = dev.kvflux.serving.http.HttpJson.MAPPER.readTree(
                        health == null || health.isEmpty() ? "{}" : health);
                return listed.path("prefill").size() > 0 && listed.path("decode").size() > 0;
            } catch (java.io.IOException e) {
                return false;
            }
        }

        @Override
        public void close() throws Exception {
            server.close();
        }
    }
}
