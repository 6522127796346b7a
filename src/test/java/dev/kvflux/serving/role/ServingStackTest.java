package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.tools.bench.LoadGenerator;
import dev.kvflux.tools.bench.LoadResult;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyEvent;
import java.time.Duration;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/** Proxy, prefill and decode over loopback with a small, fast simulated model. */
class ServingStackTest {
    /** 4 layers, 64-token prompts prefilled in well under a millisecond, 5 ms decode steps. */
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    private static LoadResult serve(Policy policy, SimulatedXgmiEngine engine, int prompts) {
        return serve(policy, engine, prompts, Duration.ofSeconds(5));
    }

    private static LoadResult serve(Policy policy, SimulatedXgmiEngine engine, int prompts, Duration requestTimeout) {
        return serve(policy, engine, prompts, requestTimeout, null, decode -> { });
    }

    private static LoadResult serve(Policy policy, SimulatedXgmiEngine engine, int prompts, Duration requestTimeout,
            NotifyAuth auth, Consumer<DecodeServer> afterwards) {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (engine;
             DecodeServer decode = DecodeServer.builder().model(SMALL)
                     .receiveDeadline(policy.decodeDeadline() ? Duration.ofSeconds(3) : null).auth(auth).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).policy(policy).engine(engine)
                     .transferTimeout(Duration.ofMillis(300)).notifyWithin(Duration.ofSeconds(3)).auth(auth).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).registrationSecret(auth).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            LoadResult result = new LoadGenerator("http://127.0.0.1:" + proxy.address().getPort(), prompts, 2, 64, 3,
                    requestTimeout).run(progress -> { });
            afterwards.accept(decode);
            return result;
        }
    }

    @Test
    void requestsFlowThroughProxyPrefillAndDecode() {
        LoadResult result = serve(Policy.KVFLUX, SimulatedXgmiEngine.create(), 4);

        assertThat(result.completed()).isEqualTo(4);
        assertThat(result.ttfts()).hasSize(4);
    }

    @Test
    void everyCompletedRequestsKvPassesDecodesContentCheck() {
        dev.kvflux.serving.metrics.PrometheusText[] metrics = new dev.kvflux.serving.metrics.PrometheusText[1];

        LoadResult result = serve(Policy.KVFLUX, SimulatedXgmiEngine.create(), 4, Duration.ofSeconds(5), null,
                decode -> metrics[0] = Completions.metrics(decode.httpAddress()));

        assertThat(result.completed()).isEqualTo(4);
        assertThat(metrics[0].count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(4);
        assertThat(metrics[0].count("kvflux_decode_kv_checks_total", "result", "corrupt")).isZero();
    }

    @Test
    void requestsFlowWithSignedNotifications() {
        NotifyAuth auth = NotifyAuth.of("serving-stack-secret-0123456789");
        long[] signedWriteDone = new long[1];
        long[] rejected = new long[1];

        LoadResult result = serve(Policy.KVFLUX, SimulatedXgmiEngine.create(), 4, Duration.ofSeconds(5), auth,
                decode -> {
                    signedWriteDone[0] = decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_DONE);
                    rejected[0] = decode.notifyMeters().count(NotifyEvent.REJECTED_UNAUTHENTICATED);
                });

        assertThat(result.completed()).isEqualTo(4);
        assertThat(signedWriteDone[0]).isEqualTo(4);
        assertThat(rejected[0]).isZero();
    }

    @Test
    void injectedStatusFailureReachesTheClientAsAClearError() {
        // batch 3 is the last layer of the first request written
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();

        LoadResult result = serve(Policy.KVFLUX, engine, 3);

        assertThat(result.failed()).isEqualTo(1);
        assertThat(result.neverFinished()).isZero();
        assertThat(result.completed()).isEqualTo(2);
        assertThat(result.sampleErrors(1)).singleElement().asString()
                .startsWith("503 prefill reported write_failed")
                .contains("StatusCode.ERR_GPU_OP").contains("injected copy failure");
    }

    @Test
    void legacyPolicyLeavesAFailedTransfersRequestUnfinished() {
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();

        LoadResult result = serve(Policy.LEGACY, engine, 1, Duration.ofMillis(1500));

        assertThat(result.neverFinished()).isEqualTo(1);
        assertThat(result.failed()).isZero();
    }

    @Test
    void aClientThatDisconnectsMidRequestLeavesNothingHeldOnEitherSide() throws Exception {
        // 4 tokens per step at 10 tokens/s: a 100-word prompt queues behind another for seconds
        ServingModel slow = new ServingModel("slow", 10, 4, 2, Duration.ofMillis(5), 16, 64);
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(slow).receiveDeadline(Duration.ofSeconds(30)).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(slow).engine(engine)
                     .transferTimeout(Duration.ofSeconds(10)).notifyWithin(Duration.ofSeconds(3)).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            java.net.InetSocketAddress at = java.net.InetSocketAddress.createUnresolved("127.0.0.1",
                    proxy.address().getPort());
            String body = "{\"prompt\": \"" + "w ".repeat(100).trim() + "\", \"max_tokens\": 2}";
            reactor.core.Disposable first = Completions.post(at, body).subscribe();
            reactor.core.Disposable second = Completions.post(at, body).subscribe();
            waitFor(() -> prefill.stats().requests() == 2 && decode.blocks().owners() == 2);

            first.dispose();
            second.dispose();

            waitFor(() -> prefill.stats().aborted() == 2);
            waitFor(() -> prefill.blocks().owners() == 0 && decode.blocks().owners() == 0);
            assertThat(prefill.blocks().owners()).isZero();
            assertThat(decode.blocks().owners()).as("released by prefill, not by the lease").isZero();
            assertThat(decode.blocks().leaseExpired()).isZero();
        }
    }

    private static void waitFor(java.util.function.BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).isTrue();
    }
}
