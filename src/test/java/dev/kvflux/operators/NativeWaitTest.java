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
    void aFailedStatusGivesItsCodeAndMessage() {
        assertThatThrownBy(() -> NativeWait.of(engine, Duration.ofSeconds(30))
                .await(List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "bad copy")))
                .block(Duration.ofSeconds(5)))
                .isInstanceOf(TransferException.class)
                .hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): bad copy");
    }
}
