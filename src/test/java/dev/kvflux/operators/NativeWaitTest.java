package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

class NativeWaitTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final RecordingEngine engine = new RecordingEngine(clock);

    @Test
    void makesOneWaitAllWithTheWholeTimeoutOnABoundedElasticThread() {
        NativeWait.of(engine, Duration.ofMillis(2500))
                .await(List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(200)))).block(Duration.ofSeconds(5));

        assertThat(engine.timeouts).containsExactly(2500L);
        assertThat(engine.threads).singleElement().satisfies(name -> assertThat(name).startsWith("boundedElastic"));
    }

    @Test
    void aStatusStillInFlightAtTheDeadlineGivesMoriiosTimeoutMessage() {
        assertThatThrownBy(() -> NativeWait.of(engine, Duration.ofSeconds(30))
                .await(List.of(ScriptedStatus.never(clock))).block(Duration.ofSeconds(5)))
                .isInstanceOf(TransferException.class)
                .hasMessage("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s");
    }

    @Test
    void theModeANativeWaitIsMadeWithChangesNeitherHowItEndsNorItsFailModeTag() {
        for (NativeWait wait : List.of(NativeWait.failFast(engine, Duration.ofSeconds(30)),
                NativeWait.drain(engine, Duration.ofSeconds(30)),
                NativeWait.of(engine, FailMode.DRAIN, Duration.ofSeconds(30)))) {
            assertThatThrownBy(() -> wait.await(List.of(ScriptedStatus.failsAt(clock, Duration.ZERO,
                            StatusCode.ERR_GPU_OP, "bad copy"), ScriptedStatus.never(clock)))
                    .block(Duration.ofSeconds(5)))
                    .as(wait.spec().mode().name())
                    .hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): bad copy");
            assertThat(reactor.core.Scannable.from(wait.await(List.of())).tags())
                    .contains(reactor.util.function.Tuples.of("fail_mode", "none"));
        }
        assertThat(engine.timeouts).containsExactly(30_000L, 30_000L, 30_000L);
    }

    @Test
    void aFailedStatusGivesItsCodeAndMessage() {
        assertThatThrownBy(() -> NativeWait.of(engine, Duration.ofSeconds(30))
                .await(List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "bad copy")))
                .block(Duration.ofSeconds(5)))
                .isInstanceOf(TransferException.class)
                .hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): bad copy");
    }
}
