package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.testing.RecordingEngine;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The one registry of wait strategies that kvflux repro and kvflux bench time. */
class ReproStrategyTest {
    private final RecordingEngine engine = new RecordingEngine(VirtualTimeScheduler.create());
    private final Duration timeout = Duration.ofSeconds(30);

    @Test
    void strategiesAreNamedAsReportsPrintThemInAnyCase() {
        assertThat(ReproStrategy.named("sliced-native")).isEqualTo(ReproStrategy.SLICED_NATIVE);
        assertThat(ReproStrategy.named(" Reactive-Push ")).isEqualTo(ReproStrategy.REACTIVE_PUSH);
        assertThat(ReproStrategy.REACTIVE_PUSH.push()).isTrue();
        assertThat(ReproStrategy.REACTIVE.push()).isFalse();
        assertThat(ReproStrategy.named("POLL-1MS")).isEqualTo(ReproStrategy.POLL_1MS);
    }

    @Test
    void poll1msIsVllmsSweepAndNeedsNoEngine() {
        assertThat(ReproStrategy.POLL_1MS.callsEngine()).isFalse();
        assertThat(ReproStrategy.POLL_1MS.push()).isFalse();
        assertThat(ReproStrategy.POLL_1MS.defaultRequests()).isEqualTo(100);
        assertThat(ReproStrategy.POLL_1MS.wait(null, FailMode.DRAIN, timeout, Duration.ofMillis(3)))
                .as("its period is vLLM's 1 ms whatever the slice").isInstanceOfSatisfying(SweepWait.class, w -> {
                    assertThat(w.mode()).isEqualTo(FailMode.DRAIN);
                    assertThat(w.transferTimeout()).isEqualTo(timeout);
                });
    }

    @Test
    void anUnknownStrategySaysWhichExist() {
        assertThatThrownBy(() -> ReproStrategy.named("spin"))
                .hasMessage("unknown wait strategy 'spin'; known strategies: native, sliced-native, poll-1ms,"
                        + " reactive, reactive-shared, reactive-adaptive, reactive-push, reactive-push-direct");
    }

    @Test
    void nativeTimesTwoRequestsByDefaultAndTheOthersAHundred() {
        assertThat(ReproStrategy.NATIVE.defaultRequests()).isEqualTo(2);
        assertThat(ReproStrategy.SLICED_NATIVE.defaultRequests()).isEqualTo(100);
        assertThat(ReproStrategy.REACTIVE.defaultRequests()).isEqualTo(100);
        assertThat(ReproStrategy.REACTIVE_SHARED.defaultRequests()).isEqualTo(100);
        assertThat(ReproStrategy.REACTIVE_PUSH.defaultRequests()).isEqualTo(100);
    }

    @Test
    void eachStrategyTimesTheOperatorOfItsNameWithTheDefaultSlice() {
        assertThat(ReproStrategy.NATIVE.wait(engine, timeout)).isInstanceOf(NativeWait.class);
        assertThat(ReproStrategy.SLICED_NATIVE.wait(engine, timeout)).isInstanceOfSatisfying(SlicedNativeWait.class,
                w -> assertThat(w.slice()).isEqualTo(WaitSpec.DEFAULT_SLICE));
        assertThat(ReproStrategy.REACTIVE.wait(engine, timeout)).isInstanceOfSatisfying(CompletionWait.class,
                w -> assertThat(w.slice()).isEqualTo(WaitSpec.DEFAULT_SLICE));
        assertThat(ReproStrategy.REACTIVE_SHARED.wait(engine, timeout)).isInstanceOfSatisfying(CompletionWait.class,
                w -> assertThat(w.isSharedPoll()).isTrue());
        assertThat(ReproStrategy.REACTIVE_PUSH.wait(engine, timeout)).isInstanceOfSatisfying(PushWait.class,
                w -> assertThat(w.signalsOnPush()).isFalse());
        assertThat(ReproStrategy.REACTIVE_PUSH_DIRECT.wait(engine, timeout)).isInstanceOfSatisfying(PushWait.class,
                w -> assertThat(w.signalsOnPush()).isTrue());
        for (ReproStrategy s : ReproStrategy.values()) {
            assertThat(s.wait(engine, timeout).strategyName()).as("the wait reports under the strategy's name")
                    .isEqualTo(s.label());
        }
    }

    @Test
    void aSliceAppliesToTheSlicingStrategiesOnly() {
        Duration slice = Duration.ofMillis(3);
        assertThat(ReproStrategy.SLICED_NATIVE.wait(engine, timeout, slice)).isInstanceOfSatisfying(
                SlicedNativeWait.class, w -> assertThat(w.slice()).isEqualTo(slice));
        assertThat(ReproStrategy.REACTIVE.wait(engine, timeout, slice)).isInstanceOfSatisfying(CompletionWait.class,
                w -> assertThat(w.slice()).isEqualTo(slice));
        assertThat(ReproStrategy.NATIVE.wait(engine, timeout, slice)).isInstanceOf(NativeWait.class);
        assertThat(ReproStrategy.REACTIVE_SHARED.wait(engine, timeout, slice)).isInstanceOfSatisfying(
                CompletionWait.class, w -> assertThat(w.slice()).isEqualTo(slice));
        assertThat(ReproStrategy.REACTIVE_PUSH.wait(engine, timeout, slice)).isInstanceOf(PushWait.class);
    }

    @Test
    void theDrainModeReachesEveryStrategyThatHasOne() {
        assertThat(ReproStrategy.SLICED_NATIVE.wait(engine, FailMode.DRAIN, timeout)).isInstanceOfSatisfying(
                SlicedNativeWait.class, w -> assertThat(w.mode()).isEqualTo(FailMode.DRAIN));
        assertThat(ReproStrategy.REACTIVE_SHARED.wait(null, FailMode.DRAIN, timeout)).isInstanceOfSatisfying(
                CompletionWait.class, w -> assertThat(w.mode()).isEqualTo(FailMode.DRAIN));
        assertThat(ReproStrategy.REACTIVE_PUSH.wait(null, FailMode.DRAIN, timeout)).isInstanceOfSatisfying(
                PushWait.class, w -> assertThat(w.mode()).isEqualTo(FailMode.DRAIN));
    }
}
