package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.RecordingWaitRecorder;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** One spec for every wait: its defaults, its checks and their messages, and what each strategy takes of it. */
class WaitSpecTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    @Test
    void aSpecFromItsModeAndTimeoutHasTheDefaults() {
        WaitSpec spec = WaitSpec.failFast(TIMEOUT);

        assertThat(spec).isEqualTo(new WaitSpec(FailMode.FAIL_FAST, TIMEOUT, WaitSpec.DEFAULT_SLICE, null, null,
                WaitRecorder.NOOP));
        assertThat(WaitSpec.drain(TIMEOUT).mode()).isEqualTo(FailMode.DRAIN);
        assertThat(WaitSpec.of(FailMode.DRAIN, TIMEOUT)).isEqualTo(WaitSpec.drain(TIMEOUT));
        assertThat(WaitSpec.DEFAULT_SLICE).isEqualTo(Duration.ofMillis(10));
    }

    @Test
    void withersReturnChangedCopiesAndLeaveTheSpecAsItWas() {
        WaitSpec spec = WaitSpec.failFast(TIMEOUT);
        WaitSpec changed = spec.slice(Duration.ofMillis(5)).stallAfter(Duration.ofSeconds(2))
                .scheduler(Schedulers.immediate());

        assertThat(changed.slice()).isEqualTo(Duration.ofMillis(5));
        assertThat(changed.stallAfter()).isEqualTo(Duration.ofSeconds(2));
        assertThat(changed.scheduler()).isSameAs(Schedulers.immediate());
        assertThat(spec).isEqualTo(WaitSpec.failFast(TIMEOUT));
    }

    @Test
    void badValuesAreRefusedWithAFixAndTheirDurationsAsTheyAreWritten() {
        assertThatThrownBy(() -> WaitSpec.failFast(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("transfer timeout must be finite and greater than zero, got 0s; the default is 30s");
        assertThatThrownBy(() -> WaitSpec.drain(Duration.ofHours(25))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("transfer timeout 90000s is longer than 24 hours");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).slice(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("slice must be positive, got 0s; the default is 10ms");
        assertThatThrownBy(() -> WaitSpec.failFast(Duration.ofSeconds(1)).slice(Duration.ofMillis(1500)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("slice 1.5s is longer than the transfer timeout 1s; choose a slice well under the timeout"
                        + " (10ms is the default)");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).stallAfter(Duration.ofMillis(5)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("stallAfter 5ms must lie between the slice (10ms) and the transfer timeout (30s); choose a"
                        + " few times the longest gap you expect between two copies finishing");
    }

    @Test
    void nullSettingsAreRefusedByName() {
        assertThatThrownBy(() -> WaitSpec.of(null, TIMEOUT)).hasMessage("mode");
        assertThatThrownBy(() -> WaitSpec.failFast(null)).hasMessage("transferTimeout");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).slice(null)).hasMessage("slice");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).stallAfter(null)).hasMessage("stallAfter");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).scheduler(null)).hasMessage("scheduler");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).recorder(null)).hasMessage("recorder");
    }

    @Test
    void aSliceLongerThanTheStallTimeIsRefusedWhicheverIsSetFirst() {
        WaitSpec stalling = WaitSpec.failFast(TIMEOUT).stallAfter(Duration.ofMillis(50));

        assertThatThrownBy(() -> stalling.slice(Duration.ofMillis(100)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("between the slice (100ms)");
        assertThatThrownBy(() -> WaitSpec.failFast(TIMEOUT).slice(Duration.ofMillis(100))
                .stallAfter(Duration.ofMillis(50)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("between the slice (100ms)");
    }

    @Test
    void aSpecPrintsItsSettingsInTheLibrarysDurationFormat() {
        assertThat(WaitSpec.failFast(Duration.ofSeconds(2)).slice(Duration.ofMillis(5)).stallAfter(Duration.ofSeconds(1)))
                .hasToString("WaitSpec[FAIL_FAST, timeout 2s, slice 5ms, stall after 1s]");
        assertThat(CompletionWait.of(WaitSpec.drain(TIMEOUT)).sharedPoll().recorder(new RecordingWaitRecorder()))
                .hasToString("CompletionWait[DRAIN, timeout 30s, slice 10ms, recorded, shared poll]");
        assertThat(PushWait.failFast(TIMEOUT).slice(Duration.ofMillis(20)))
                .hasToString("PushWait[FAIL_FAST, timeout 30s, slice 20ms]");
    }

    @Test
    void everyStrategyMadeFromOneSpecKeepsItsSettings() {
        RecordingEngine engine = new RecordingEngine(VirtualTimeScheduler.create());
        WaitSpec spec = WaitSpec.drain(Duration.ofSeconds(7)).slice(Duration.ofMillis(4))
                .stallAfter(Duration.ofSeconds(1));

        assertThat(CompletionWait.of(spec).spec()).isEqualTo(spec);
        assertThat(PushWait.of(spec).spec()).isEqualTo(spec);
        assertThat(SlicedNativeWait.of(engine, spec).spec()).isEqualTo(spec);
        assertThat(NativeWait.of(engine, spec).transferTimeout()).isEqualTo(Duration.ofSeconds(7));
        assertThat(PushWait.of(FailMode.DRAIN, Duration.ofSeconds(7)).spec()).isEqualTo(WaitSpec.drain(Duration.ofSeconds(7)));
        assertThat(SlicedNativeWait.of(engine, FailMode.DRAIN, Duration.ofSeconds(7)).mode()).isEqualTo(FailMode.DRAIN);
    }

    @Test
    void theSlicedNativeWaitRefusesASpecWhoseSliceWaitAllCannotTake() {
        RecordingEngine engine = new RecordingEngine(VirtualTimeScheduler.create());
        WaitSpec spec = WaitSpec.failFast(TIMEOUT).slice(Duration.ofNanos(500_000));

        assertThatThrownBy(() -> SlicedNativeWait.of(engine, spec)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a native slice is whole milliseconds and at least 1ms, got 500us; the default is 10ms");
        assertThatThrownBy(() -> SlicedNativeWait.failFast(engine, TIMEOUT).slice(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("a native slice");
    }

    @Test
    void eachStrategyReportsUnderTheNameItsPublishersAreTaggedWith() {
        RecordingEngine engine = new RecordingEngine(VirtualTimeScheduler.create());

        assertThat(CompletionWait.failFast(TIMEOUT).strategyName()).isEqualTo(WaitStrategy.REACTIVE).isEqualTo("reactive");
        assertThat(CompletionWait.failFast(TIMEOUT).sharedPoll().strategyName())
                .isEqualTo(WaitStrategy.REACTIVE_SHARED).isEqualTo("reactive-shared");
        assertThat(PushWait.failFast(TIMEOUT).strategyName()).isEqualTo(WaitStrategy.REACTIVE_PUSH)
                .isEqualTo("reactive-push");
        assertThat(NativeWait.of(engine, TIMEOUT).strategyName()).isEqualTo(WaitStrategy.NATIVE).isEqualTo("native");
        assertThat(SlicedNativeWait.failFast(engine, TIMEOUT).strategyName()).isEqualTo(WaitStrategy.SLICED_NATIVE)
                .isEqualTo("sliced-native");
    }

    @Test
    void theSpecsRecorderHearsTheWaitUnderTheStrategysName() {
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        StepVerifier.withVirtualTime(() -> CompletionWait.of(WaitSpec.failFast(TIMEOUT).recorder(recorder)).sharedPoll()
                        .await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(15)))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(20))
                .verifyComplete();

        assertThat(recorder.started).containsExactly("reactive-shared");
    }
}
