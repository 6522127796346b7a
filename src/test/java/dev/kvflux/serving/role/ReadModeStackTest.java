package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.tools.bench.LoadGenerator;
import dev.kvflux.tools.bench.LoadResult;
import dev.kvflux.transfer.KvMode;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/** Proxy, prefill and decode in READ mode: decode pulls each layer from prefill's blocks and releases them. */
class ReadModeStackTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    /** What a run left: its load result and both roles' metrics and block owners afterwards. */
    private record Run(LoadResult result, PrometheusText prefill, PrometheusText decode, long prefillOwners,
            long decodeOwners) {
    }

    private static Run serve(DescribedEngine prefillEngine, DescribedEngine decodeEngine, int prompts) {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (prefillEngine; decodeEngine;
             DecodeServer decode = DecodeServer.builder().model(SMALL).engine(decodeEngine).kvMode(KvMode.READ)
                     .receiveDeadline(Duration.ofSeconds(3)).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(prefillEngine).kvMode(KvMode.READ)
                     .transferTimeout(Duration.ofMillis(300)).notifyWithin(Duration.ofSeconds(3)).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            LoadResult result = new LoadGenerator("http://127.0.0.1:" + proxy.address().getPort(), prompts, 2, 64, 3,
                    Duration.ofSeconds(5)).run(progress -> { });
            waitFor(() -> prefill.blocks().owners() == 0 && decode.blocks().owners() == 0);
            return new Run(result, Completions.metrics(prefill.httpAddress()), Completions.metrics(decode.httpAddress()),
                    prefill.blocks().owners(), decode.blocks().owners());
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void decodeReadsEveryRequestsKvFromPrefillChecksItAndReleasesPrefillsBlocks() {
        Run run = serve(SimulatedXgmiEngine.create(), SimulatedXgmiEngine.create(), 4);

        assertThat(run.result().completed()).isEqualTo(4);
        assertThat(run.decode().count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(4);
        assertThat(run.decode().count("kvflux_decode_read_releases_sent_total")).isEqualTo(4);
        assertThat(run.prefill().count("kvflux_prefill_read_holds_ended_total", "by", "release")).isEqualTo(4);
        assertThat(run.prefill().count("kvflux_prefill_read_holds_ended_total", "by", "lease")).isZero();
        assertThat(run.prefillOwners()).isZero();
        assertThat(run.decodeOwners()).isZero();
    }

    @Test
    void onTheNativeSimulatorDecodeReadsPrefillsBytesThroughItsSharedMemoryAndChecksEveryOne() {
        Run run = serve(NativeTransferEngine.simulated("read-p"), NativeTransferEngine.simulated("read-d"), 4);

        assertThat(run.result().completed()).isEqualTo(4);
        assertThat(run.decode().count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(4);
        assertThat(run.decode().count("kvflux_decode_kv_mismatched_blocks")).isZero();
        assertThat(run.decode().count("kvflux_decode_kv_checked_bytes")).isPositive();
        assertThat(run.decode().count("kvflux_wait_strategy", "strategy", "reactive-push"))
                .as("decode's reads ended by the C simulator's pushes").isEqualTo(1);
        assertThat(run.prefillOwners()).isZero();
    }

    @Test
    void aReadFailingAtOneLayerFailsItsRequestWithTheCodeAndStillFreesBothSides() {
        // batch 2 is layer 2 of the first request's 4 reads
        SimulatedXgmiEngine decodeEngine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(2, Duration.ofMillis(1), StatusCode.ERR_RDMA_OP, "injected read failure")).build();

        Run run = serve(SimulatedXgmiEngine.create(), decodeEngine, 3);

        assertThat(run.result().failed()).isEqualTo(1);
        assertThat(run.result().neverFinished()).isZero();
        assertThat(run.result().completed()).isEqualTo(2);
        assertThat(run.result().sampleErrors(1)).singleElement().asString().startsWith("503 ")
                .contains("StatusCode.ERR_RDMA_OP").contains("layer 2 of 4").contains("injected read failure");
        assertThat(run.prefill().count("kvflux_prefill_read_holds_ended_total", "by", "release"))
                .as("the failed request's reads drained, then prefill was released").isEqualTo(3);
        assertThat(run.prefillOwners()).isZero();
        assertThat(run.decodeOwners()).isZero();
        assertThat(run.decode().count("kvflux_decode_kv_wait_seconds_count", "outcome", "read_failed"))
                .as("the failed request's wait ended once, as a failed read").isEqualTo(1);
        assertThat(run.decode().count("kvflux_decode_kv_wait_seconds_count", "outcome", "cancelled")).isZero();
    }

    private static void waitFor(BooleanSupplier condition) {
        long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!condition.getAsBoolean() && System.nanoTime() - until < 0) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
