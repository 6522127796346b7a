package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.mori.PushMode;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.serving.config.KvfluxConfig;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class PolicyTest {
    private static final KvfluxConfig.Transfer CONFIGURED = new KvfluxConfig.Transfer(Duration.ofSeconds(7),
            Duration.ofMillis(4), FailMode.DRAIN, 12, Duration.ofMillis(2), Duration.ofSeconds(9));

    @Test
    void theKvfluxPolicyTakesTheConfiguredWaitAndRequestsInFlight() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            WritePipeline pipeline = Policy.KVFLUX.writePipeline(engine, CONFIGURED);

            assertThat(pipeline.maxInFlight()).isEqualTo(12);
            assertThat(pipeline.waitStrategy()).isInstanceOfSatisfying(CompletionWait.class, wait -> {
                assertThat(wait.mode()).isEqualTo(FailMode.DRAIN);
                assertThat(wait.transferTimeout()).isEqualTo(Duration.ofSeconds(7));
                assertThat(wait.slice()).isEqualTo(Duration.ofMillis(4));
            });
        }
    }

    @Test
    void onTheSimulatedXgmiEngineWhichCannotPushTheKvfluxPolicyPollsAdaptively() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            WaitStrategy wait = Policy.KVFLUX.writePipeline(engine, CONFIGURED).waitStrategy();

            assertThat(wait.strategyName()).isEqualTo(WaitStrategy.REACTIVE_ADAPTIVE);
            assertThat(wait).isInstanceOfSatisfying(CompletionWait.class,
                    poll -> assertThat(poll.copyRate()).as("a rate learnt from this engine's waits").isPresent());
        }
    }

    @Test
    void onTheCSimulatorTheKvfluxPolicySwitchesThePushOnAndTakesTheConfiguredPushWait() {
        try (NativeTransferEngine engine = NativeTransferEngine.simulated("policy-push")) {
            WritePipeline pipeline = Policy.KVFLUX.writePipeline(engine, CONFIGURED);

            assertThat(engine.engine().pushMode()).isEqualTo(PushMode.ON);
            assertThat(pipeline.maxInFlight()).isEqualTo(12);
            assertThat(pipeline.waitStrategy().strategyName()).isEqualTo(WaitStrategy.REACTIVE_PUSH);
            assertThat(pipeline.waitStrategy()).isInstanceOfSatisfying(PushWait.class, wait -> {
                assertThat(wait.mode()).isEqualTo(FailMode.DRAIN);
                assertThat(wait.transferTimeout()).isEqualTo(Duration.ofSeconds(7));
            });
        }
    }

    @Test
    void legacyAndSlicedLeaveTheEnginesPushOffAsVllmsConnectorDoes() {
        try (NativeTransferEngine engine = NativeTransferEngine.simulated("policy-no-push")) {
            Policy.LEGACY.writePipeline(engine, CONFIGURED);
            Policy.SLICED.writePipeline(engine, CONFIGURED);

            assertThat(engine.engine().pushMode()).isEqualTo(PushMode.OFF);
        }
    }

    @Test
    void legacyAndSlicedWriteOneRequestAtATimeWithTheirNativeWaits() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            WritePipeline legacy = Policy.LEGACY.writePipeline(engine, CONFIGURED);
            WritePipeline sliced = Policy.SLICED.writePipeline(engine, CONFIGURED);

            assertThat(legacy.maxInFlight()).isEqualTo(1);
            assertThat(legacy.waitStrategy()).isInstanceOf(NativeWait.class);
            assertThat(sliced.maxInFlight()).isEqualTo(1);
            assertThat(sliced.waitStrategy()).isInstanceOfSatisfying(SlicedNativeWait.class,
                    wait -> assertThat(wait.slice()).isEqualTo(Duration.ofMillis(4)));
        }
    }
}
