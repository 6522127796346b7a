package dev.kvflux.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class ReadBarrierTest {

    @Test
    void theBarrierDrainsEveryReadBeforeItErrors() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return ReadBarrier.of(Duration.ofSeconds(30)).await(List.of(
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(80)),
                            ScriptedStatus.failsAt(clock, Duration.ofMillis(20), StatusCode.ERR_RDMA_OP, "qp error"),
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(500))));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(500))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferException.class)
                        .hasMessage("MoRIIO batch wait failed (StatusCode.ERR_RDMA_OP): qp error"))
                .verify();
    }

    @Test
    void aFailFastWaitIsRefusedForTheBarrier() {
        assertThatThrownBy(() -> ReadBarrier.using(CompletionWait.failFast(Duration.ofSeconds(30))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must drain");
    }
}
