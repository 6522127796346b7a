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
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/** Proxy, a prefill of 2 ranks and a decode of 4 (four links per request), through HTTP as a client sees them. */
class RanksStackTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final int PREFILL_TP = 2;
    private static final int DECODE_TP = 4;
    private static final int LINKS = 4;

    private record Run(LoadResult result, PrometheusText prefill, PrometheusText decode, long prefillOwners,
            long decodeOwners) {
    }

    private static List<DescribedEngine> engines(int tp, IntFunction<DescribedEngine> rank) {
        List<DescribedEngine> engines = new ArrayList<>(tp);
        for (int r = 0; r < tp; r++) {
            engines.add(rank.apply(r));
        }
        return engines;
    }

    private static Run serve(KvMode mode, List<DescribedEngine> prefillEngines, List<DescribedEngine> decodeEngines,
            int prompts) {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (DecodeServer decode = DecodeServer.builder().model(SMALL).engines(decodeEngines).tp(DECODE_TP)
                     .peerTp(PREFILL_TP).kvMode(mode).receiveDeadline(Duration.ofSeconds(3)).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engines(prefillEngines).tp(PREFILL_TP)
                     .peerTp(DECODE_TP).kvMode(mode).transferTimeout(Duration.ofMillis(300))
                     .notifyWithin(Duration.ofSeconds(3)).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            LoadResult result = new LoadGenerator("http://127.0.0.1:" + proxy.address().getPort(), prompts, 2, 64, 3,
                    Duration.ofSeconds(5)).run(progress -> { });
            waitFor(() -> prefill.blocks().owners() == 0 && decode.blocks().owners() == 0);
            return new Run(result, Completions.metrics(prefill.httpAddress()), Completions.metrics(decode.httpAddress()),
                    prefill.blocks().owners(), decode.blocks().owners());
        } finally {
            prefillEngines.forEach(DescribedEngine::close);
            decodeEngines.forEach(DescribedEngine::close);
        }
    }

    @ParameterizedTest
    @EnumSource(KvMode.class)
    void onTheCSimulatorDecodeChecksTheBytesOfEveryRanksShardOfEveryRequest(KvMode mode) {
        Run run = serve(mode, engines(PREFILL_TP, r -> NativeTransferEngine.simulated("ranks-p-" + mode + "-" + r)),
                engines(DECODE_TP, r -> NativeTransferEngine.simulated("ranks-d-" + mode + "-" + r)), 4);

        assertThat(run.result().completed()).isEqualTo(4);
        assertThat(run.decode().count("kvflux_decode_kv_checks_total", "result", "verified"))
                .as("one check per link of every request").isEqualTo(4 * LINKS);
        assertThat(run.decode().count("kvflux_decode_kv_mismatched_blocks")).isZero();
        assertThat(run.decode().count("kvflux_decode_kv_checked_bytes")).isPositive();
        assertThat(run.prefillOwners()).isZero();
        assertThat(run.decodeOwners()).isZero();
    }

    @Test
    void aReadFailingOnOneDecodeRankFailsItsRequestOnceWithTheCodeAndFreesEveryRank() {
        // decode rank 3's engine fails its third read batch: one link of one request
        Run run = serve(KvMode.READ, engines(PREFILL_TP, r -> SimulatedXgmiEngine.create()),
                engines(DECODE_TP, r -> r == 3 ? SimulatedXgmiEngine.builder().fault(Fault.fail(2, Duration.ofMillis(1),
                        StatusCode.ERR_RDMA_OP, "injected read failure")).build() : SimulatedXgmiEngine.create()), 3);

        assertThat(run.result().failed()).isEqualTo(1);
        assertThat(run.result().completed()).isEqualTo(2);
        assertThat(run.result().neverFinished()).isZero();
        assertThat(run.result().sampleErrors(1)).singleElement().asString().startsWith("503 ")
                .contains("ERR_RDMA_OP").contains("decode rank 3").contains("injected read failure");
        // every link's wait ended once: the links that were still waiting ended with the failed one
        long failedLinks = run.decode().count("kvflux_decode_kv_wait_seconds_count", "outcome", "read_failed");
        assertThat(failedLinks).isBetween(1L, (long) LINKS);
        assertThat(run.decode().count("kvflux_decode_kv_wait_seconds_count", "outcome", "write_done") + failedLinks)
                .as("one wait per link of every request").isEqualTo(3 * LINKS);
        assertThat(run.decode().count("kvflux_decode_kv_wait_seconds_count", "outcome", "cancelled")).isZero();
        assertThat(run.prefillOwners()).isZero();
        assertThat(run.decodeOwners()).isZero();
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
