package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/** The load generator against a stand-in server that completes, fails or never answers by prompt. */
class LoadGeneratorTest {

    @Test
    void completedPlusFailedPlusNeverFinishedEqualsSent() {
        DisposableServer server = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().aggregate().asString()
                        .flatMap(body -> {
                            String prompt = HttpJson.object(body).get("prompt").asText();
                            int index = Integer.parseInt(prompt.substring(1, prompt.indexOf(' ')));
                            return switch (index % 3) {
                                case 0 -> res.header("content-type", "text/event-stream")
                                        .sendString(Flux.just("data: {\"t\":0}\n\n", "data: [DONE]\n\n")).then();
                                case 1 -> Mono.from(HttpJson.error(res,
                                        io.netty.handler.codec.http.HttpResponseStatus.SERVICE_UNAVAILABLE,
                                        "kv_transfer_failed", "ERR_RDMA_OP", "prefill reported write_failed"));
                                default -> Mono.never();
                            };
                        })))
                .bindNow();
        try {
            String url = "http://127.0.0.1:" + server.port();
            LoadResult result = new LoadGenerator(url, 7, 3, 8, 2, Duration.ofMillis(400)).run(progress -> { });

            assertThat(result.sent()).isEqualTo(7);
            assertThat(result.completed()).isEqualTo(3);
            assertThat(result.failed()).isEqualTo(2);
            assertThat(result.neverFinished()).isEqualTo(2);
            assertThat(result.completed() + result.failed() + result.neverFinished()).isEqualTo(result.sent());
            assertThat(result.sampleErrors(5)).containsExactly("503 prefill reported write_failed");
            assertThat(result.ttfts()).hasSize(3);
            assertThat(result.ttfts()[0]).isPositive();
        } finally {
            server.disposeNow();
        }
    }

    @Test
    void requestsTheProxyRefusesAsOverloadedAreCountedFailedAndEveryRequestIsCounted() {
        DisposableServer prefill = holding();
        DisposableServer decode = holding();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(new Instance(Role.PREFILL, new InetSocketAddress("127.0.0.1", prefill.port()),
                new InetSocketAddress("127.0.0.1", 7001)));
        registry.ping(new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", decode.port()),
                new InetSocketAddress("127.0.0.1", 7002)));
        // one connection to each instance and two requests waiting for it: of six at once, each instance takes three and
        // refuses three, so three or more are refused. How many of the rest never finish depends on which requests each
        // instance took (none, when the two took different ones): completedPlusFailedPlusNeverFinishedEqualsSent
        // counts those
        try (ProxyServer proxy = ProxyServer.builder().registry(registry).upstreamTimeout(Duration.ofMinutes(1))
                .maxConnections(1).bindNow()) {
            String url = "http://127.0.0.1:" + proxy.address().getPort();
            LoadResult result = new LoadGenerator(url, 6, 6, 8, 2, Duration.ofMillis(400)).run(progress -> { });

            assertThat(result.completed() + result.failed() + result.neverFinished()).isEqualTo(6);
            assertThat(result.completed()).isZero();
            assertThat(result.failed()).isGreaterThanOrEqualTo(3);
            assertThat(result.sampleErrors(5)).isNotEmpty()
                    .allSatisfy(error -> assertThat(error).startsWith("503 ").contains("overloaded"));
        } finally {
            prefill.disposeNow();
            decode.disposeNow();
        }
    }

    /** An instance that takes completions and never answers. */
    private static DisposableServer holding() {
        return HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> Mono.never())).bindNow();
    }

    @Test
    void ttftPercentilesInterpolateBetweenCompletedRequestsOnly() {
        LoadResult result = new LoadResult(java.util.List.of(RequestResult.completed(4, 5), RequestResult.completed(1, 2),
                RequestResult.failed(0.5, "503"), RequestResult.completed(3, 4), RequestResult.completed(2, 3)), 1);
        assertThat(result.ttftPercentile(50)).isEqualTo(2.5);
        assertThat(result.ttftPercentile(90)).isEqualTo(3.7, org.assertj.core.data.Offset.offset(1e-9));
        assertThat(result.ttftPercentile(100)).isEqualTo(4);
        assertThat(new LoadResult(java.util.List.of(RequestResult.neverFinished(1)), 1).ttftPercentile(50)).isNaN();
    }

    @Test
    void aRequestTimeoutOfZeroIsRefusedInsteadOfCountingEveryRequestAsNeverFinished() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new LoadGenerator("http://127.0.0.1:1", 1, 1, 1, 1,
                        Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("request timeout must be greater than zero");
    }

    @Test
    void serveBenchSettingsRefuseNonPositiveTimesAndCounts() {
        dev.kvflux.serving.role.ServingModel model = dev.kvflux.serving.role.ServingModel.DEEPSEEK_V2_LITE_MI355X;
        java.util.List<dev.kvflux.serving.role.Policy> policies = java.util.List.of(dev.kvflux.serving.role.Policy.KVFLUX);

        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new ServeBench.Settings(policies, java.util.List.of(1),
                        java.util.List.of(1), 1, 1, Duration.ZERO, null, false, FaultPlan.NONE, model, Duration.ofSeconds(1),
                        0, 0, null))
                .hasMessageContaining("transfer timeout must be greater than zero");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new ServeBench.Settings(policies, java.util.List.of(1),
                        java.util.List.of(0), 1, 1, Duration.ofSeconds(1), null, false, FaultPlan.NONE, model,
                        Duration.ofSeconds(1), 0, 0, null))
                .hasMessageContaining("at least 1");
    }
}
