package dev.kvflux.pipeline.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.pipeline.repro.ReproGeometry;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

class ReproStrategyTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final RecordingEngine engine = new RecordingEngine(clock);

    @Test
    void strategiesAreNamedAsReportsPrintThem() {
        assertThat(ReproStrategy.named("sliced-native")).isEqualTo(ReproStrategy.SLICED_NATIVE);
        assertThat(ReproStrategy.named("reactive-push").push()).isTrue();
        assertThat(ReproStrategy.named("reactive").push()).isFalse();
    }

    @Test
    void anUnknownStrategySaysWhichExist() {
        assertThatThrownBy(() -> ReproStrategy.named("spin"))
                .hasMessageContaining("use native, sliced-native, reactive or reactive-push");
    }

    @Test
    void timeoutsParseAsTheSeedWritesThem() {
        assertThat(CudaRepro.Options.duration("30s")).isEqualTo(Duration.ofSeconds(30));
        assertThat(CudaRepro.Options.duration("500ms")).isEqualTo(Duration.ofMillis(500));
        assertThat(CudaRepro.Options.duration("2.5")).isEqualTo(Duration.ofMillis(2500));
    }

    @Test
    void theDefaultsAreTheSeedsGeometryAndTimeout() {
        CudaRepro.Options o = CudaRepro.Options.parse(new String[0]);
        assertThat(o.layout).isEqualTo(ReproGeometry.SEED);
        assertThat(o.timeout).isEqualTo(Duration.ofSeconds(30));
        assertThat(o.strategies).containsExactly(ReproStrategy.values());
    }

    @Test
    void eachStrategyTimesTheOperatorOfItsName() {
        Duration timeout = Duration.ofSeconds(30);
        assertThat(ReproStrategy.NATIVE.wait(engine, timeout)).isInstanceOf(NativeWait.class);
        assertThat(ReproStrategy.SLICED_NATIVE.wait(engine, timeout)).isInstanceOfSatisfying(SlicedNativeWait.class,
                w -> assertThat(w.slice()).isEqualTo(CompletionWait.DEFAULT_SLICE));
        assertThat(ReproStrategy.REACTIVE.wait(engine, timeout)).isInstanceOf(CompletionWait.class);
        assertThat(ReproStrategy.REACTIVE_PUSH.wait(engine, timeout)).isInstanceOf(PushWait.class);
        for (ReproStrategy s : ReproStrategy.values()) {
            assertThat(s.wait(engine, timeout).strategyName()).isEqualTo(s.label());
        }
    }

    @Test
    void nativeMakesOneWaitAllWithTheWholeTimeoutAndPrintsTheSeedsTimeoutMessage() {
        String outcome = ReproStrategy.NATIVE.await(engine, List.of(ScriptedStatus.never(clock)),
                Duration.ofSeconds(30));

        assertThat(outcome).isEqualTo("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out"
                + " after 30s");
        assertThat(engine.timeouts).containsExactly(30_000L);
    }

    @Test
    void slicedNativeWaitsInTenMillisecondSlicesUntilTheStatusesSucceed() {
        String outcome = ReproStrategy.SLICED_NATIVE.await(engine,
                List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(25))), Duration.ofSeconds(30));

        assertThat(outcome).isEqualTo("ok");
        assertThat(engine.timeouts).containsExactly(10L, 10L, 10L);
    }

    @Test
    void aFailedBatchPrintsItsCodeAndMessage() {
        String outcome = ReproStrategy.SLICED_NATIVE.await(engine,
                List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "copy failed")),
                Duration.ofSeconds(30));

        assertThat(outcome).isEqualTo("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy failed");
    }
}
