package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproStrategy;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The GPU reproducer's options and how it reports a wait's outcome. */
class CudaReproWaitTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final RecordingEngine engine = new RecordingEngine(clock);

    @Test
    void timeoutsParseAsTheSeedWritesThemInAnyCase() {
        assertThat(CudaRepro.Options.duration("--transfer-timeout", "30s")).isEqualTo(Duration.ofSeconds(30));
        assertThat(CudaRepro.Options.duration("--transfer-timeout", "500ms")).isEqualTo(Duration.ofMillis(500));
        assertThat(CudaRepro.Options.duration("--transfer-timeout", "2.5")).isEqualTo(Duration.ofMillis(2500));
        assertThat(CudaRepro.Options.duration("--transfer-timeout", "30S")).isEqualTo(Duration.ofSeconds(30));
    }

    @Test
    void aBadTimeoutSaysWhatTheOptionTakes() {
        assertThatThrownBy(() -> CudaRepro.Options.parse(new String[] {"--transfer-timeout", "3x"}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("--transfer-timeout takes 30s, 500ms or seconds, got '3x'");
    }

    @Test
    void theDefaultsAreTheSeedsGeometryAndTimeout() {
        CudaRepro.Options o = CudaRepro.Options.parse(new String[0]);
        assertThat(o.layout).isEqualTo(ReproGeometry.SEED);
        assertThat(o.timeout).isEqualTo(Duration.ofSeconds(30));
        assertThat(o.strategies).containsExactly(ReproStrategy.values());
    }

    @Test
    void nativeMakesOneWaitAllWithTheWholeTimeoutAndPrintsTheSeedsTimeoutMessage() {
        String outcome = CudaRepro.await(ReproStrategy.NATIVE.wait(engine, Duration.ofSeconds(30)),
                List.of(ScriptedStatus.never(clock)));

        assertThat(outcome).isEqualTo("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out"
                + " after 30s");
        assertThat(engine.timeouts).containsExactly(30_000L);
    }

    @Test
    void slicedNativeWaitsInTenMillisecondSlicesUntilTheStatusesSucceed() {
        String outcome = CudaRepro.await(ReproStrategy.SLICED_NATIVE.wait(engine, Duration.ofSeconds(30)),
                List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(25))));

        assertThat(outcome).isEqualTo("ok");
        assertThat(engine.timeouts).containsExactly(10L, 10L, 10L);
    }

    @Test
    void aFailedBatchPrintsItsCodeAndMessage() {
        String outcome = CudaRepro.await(ReproStrategy.SLICED_NATIVE.wait(engine, Duration.ofSeconds(30)),
                List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "copy failed")));

        assertThat(outcome).isEqualTo("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy failed");
    }
}
