package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.spi.ILoggingEvent;
import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.mori.PushMode;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.observe.LogRecorder;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.tools.bench.LoadGenerator;
import dev.kvflux.tools.bench.LoadResult;
import dev.kvflux.transfer.KvMode;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A role waits for its engine's pushes where the engine pushes completion and polls where it does not, and says
 * which at start: in its startup line ({@code wait reactive-push}) and in the gauge {@code kvflux.wait.strategy}.
 */
class WaitChoiceTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    /** The one line {@code role} logged when it started listening at {@code http}. */
    private static String startLine(LogRecorder log, String role, InetSocketAddress http) {
        List<String> lines = log.mentioning(role + " listening: http " + Instance.hostPort(http) + ",").stream()
                .map(ILoggingEvent::getFormattedMessage).toList();
        assertThat(lines).hasSize(1);
        return lines.getFirst();
    }

    /** The values of the {@code strategy} tag of {@code kvflux_wait_strategy} in {@code metrics}, each 1. */
    private static List<String> strategyGauge(PrometheusText metrics) {
        List<PrometheusText.Sample> samples = metrics.samples().stream()
                .filter(s -> s.name().equals("kvflux_wait_strategy")).toList();
        assertThat(samples).allSatisfy(s -> assertThat(s.value()).isEqualTo(1.0));
        return samples.stream().map(s -> s.labels().get("strategy")).toList();
    }

    @Test
    void decodeReadsOverTheCSimulatorThroughADrainingPushWaitWithItsEnginesPushOn() {
        try (NativeTransferEngine engine = NativeTransferEngine.simulated("wait-choice-reads")) {
            WaitStrategy wait = WaitChoice.reads(engine, Duration.ofSeconds(5)).waitStrategy();

            assertThat(wait).isInstanceOfSatisfying(PushWait.class, push -> {
                assertThat(push.mode()).isEqualTo(FailMode.DRAIN);
                assertThat(push.transferTimeout()).isEqualTo(Duration.ofSeconds(5));
            });
            assertThat(engine.engine().pushMode()).isEqualTo(PushMode.ON);
        }
    }

    @Test
    void decodeReadsOverTheSimulatedXgmiEngineThroughADrainingAdaptivePoll() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            WaitStrategy wait = WaitChoice.reads(engine, Duration.ofSeconds(5)).waitStrategy();

            assertThat(wait).isInstanceOfSatisfying(CompletionWait.class, poll -> {
                assertThat(poll.mode()).isEqualTo(FailMode.DRAIN);
                assertThat(poll.copyRate()).isPresent();
            });
            assertThat(wait.strategyName()).isEqualTo(WaitStrategy.REACTIVE_ADAPTIVE);
        }
    }

    /**
     * Starts prefill over {@code engine} (closed after it) under {@code policy}; asserts its startup line says
     * {@code policy <name>, wait <strategy>,} and its gauge names the strategy alone.
     */
    private static void prefillSaysItWaitsWith(DescribedEngine engine, Policy policy, String strategy) {
        try (LogRecorder log = LogRecorder.record(); engine;
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine).policy(policy).bindNow()) {
            assertThat(startLine(log, "prefill", prefill.httpAddress()))
                    .contains("policy " + policy.wireName() + ", wait " + strategy + ",");
            assertThat(strategyGauge(Completions.metrics(prefill.httpAddress()))).containsExactly(strategy);
        }
    }

    @Test
    void prefillOverTheCSimulatorSaysAtStartThatItWaitsForPushes() {
        prefillSaysItWaitsWith(NativeTransferEngine.simulated("wait-choice-p"), Policy.KVFLUX, "reactive-push");
    }

    @Test
    void prefillOverTheSimulatedXgmiEngineSaysAtStartThatItPollsAdaptively() {
        prefillSaysItWaitsWith(SimulatedXgmiEngine.create(), Policy.KVFLUX, "reactive-adaptive");
    }

    @Test
    void underTheSlicedPolicyPrefillNamesVllmsSlicedWaitAndLeavesTheEnginesPushOff() {
        NativeTransferEngine engine = NativeTransferEngine.simulated("wait-choice-sliced");
        prefillSaysItWaitsWith(engine, Policy.SLICED, "sliced-native");
        assertThat(engine.engine().pushMode()).isEqualTo(PushMode.OFF);
    }

    @Test
    void decodeReadingOverTheCSimulatorSaysAtStartThatItWaitsForPushes() {
        try (LogRecorder log = LogRecorder.record();
             NativeTransferEngine engine = NativeTransferEngine.simulated("wait-choice-d-read");
             DecodeServer decode = DecodeServer.builder().model(SMALL).engine(engine).kvMode(KvMode.READ).bindNow()) {
            assertThat(startLine(log, "decode", decode.httpAddress())).contains("READ mode, wait reactive-push,");
            assertThat(strategyGauge(Completions.metrics(decode.httpAddress()))).containsExactly("reactive-push");
        }
    }

    @Test
    void decodeInWriteModeWaitsForNoStatusesSoItNamesNoWait() {
        try (LogRecorder log = LogRecorder.record();
             NativeTransferEngine engine = NativeTransferEngine.simulated("wait-choice-d-write");
             DecodeServer decode = DecodeServer.builder().model(SMALL).engine(engine).bindNow()) {
            assertThat(startLine(log, "decode", decode.httpAddress())).contains("WRITE mode,").doesNotContain("wait ");
            assertThat(strategyGauge(Completions.metrics(decode.httpAddress()))).isEmpty();
            assertThat(engine.engine().pushMode()).isEqualTo(PushMode.OFF);
        }
    }

    @Test
    void writesOverTheCSimulatorEndThroughTheirPushesWithNoPollAfterTheFirstQuery() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        try (NativeTransferEngine prefillEngine = NativeTransferEngine.simulated("wait-choice-stack-p");
             NativeTransferEngine decodeEngine = NativeTransferEngine.simulated("wait-choice-stack-d");
             DecodeServer decode = DecodeServer.builder().model(SMALL).engine(decodeEngine)
                     .receiveDeadline(Duration.ofSeconds(30)).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(prefillEngine).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());

            LoadResult result = new LoadGenerator("http://127.0.0.1:" + proxy.address().getPort(), 4, 2, 64, 3,
                    Duration.ofSeconds(30)).run(progress -> { });

            assertThat(result.completed()).isEqualTo(4);
            PrometheusText metrics = Completions.metrics(prefill.httpAddress());
            assertThat(metrics.count("kvflux_wait_duration_seconds_count", "strategy", "reactive-push", "outcome",
                    "done")).as("every write waited for by the push wait").isEqualTo(4);
            assertThat(metrics.count("kvflux_wait_duration_seconds_count")).as("and by no other").isEqualTo(4);
            assertThat(metrics.count("kvflux_wait_polls_total", "strategy", "reactive-push"))
                    .as("one round per wait, the query at subscription: the rest came by push").isEqualTo(4);
            assertThat(Completions.metrics(decode.httpAddress()).count("kvflux_decode_kv_checks_total", "result",
                    "verified")).as("every block's bytes arrived").isEqualTo(4);
        }
    }
}
