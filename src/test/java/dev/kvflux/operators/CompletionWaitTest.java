package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class CompletionWaitTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final Duration SLICE = Duration.ofMillis(10);

    private static boolean isTransfer(Throwable e, StatusCode code) {
        return e instanceof TransferException t && t.code() == code;
    }

    @Test
    void completesWithinOneSliceOfTheLastCompletion() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return CompletionWait.failFast(TIMEOUT).await(List.of(
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(93)),
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(205))));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(205))
                .thenAwait(SLICE)
                .verifyComplete();
    }

    @Test
    void failFastErrorsWithinOneSliceOfAFailure() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return CompletionWait.failFast(TIMEOUT).await(List.of(
                            ScriptedStatus.never(clock),
                            ScriptedStatus.failsAt(clock, Duration.ofMillis(42), StatusCode.ERR_GPU_OP, "copy died")));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(49))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> {
                    assertThat(isTransfer(e, StatusCode.ERR_GPU_OP)).isTrue();
                    assertThat(e).hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy died");
                })
                .verify();
    }

    @Test
    void drainErrorsOnceNothingIsInFlightAndNotBefore() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return CompletionWait.drain(TIMEOUT).await(List.of(
                            ScriptedStatus.failsAt(clock, Duration.ofMillis(20), StatusCode.ERR_RDMA_OP, "nic"),
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(500))));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(500))
                .expectErrorSatisfies(e -> assertThat(isTransfer(e, StatusCode.ERR_RDMA_OP)).isTrue())
                .verify();
    }

    @Test
    void timeoutFiresAtTransferTimeoutWithTheSeedsMessage() {
        StepVerifier.withVirtualTime(() -> CompletionWait.failFast(TIMEOUT)
                        .await(List.of(ScriptedStatus.never(VirtualTimeScheduler.get()))))
                .expectSubscription()
                .expectNoEvent(TIMEOUT.minusNanos(1))
                .thenAwait(Duration.ofNanos(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferException.class).hasMessage(
                        "MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s"))
                .verify();
    }

    @Test
    void emptyAndAlreadyDoneListsCompleteWithoutWaitingATick() {
        StepVerifier.withVirtualTime(() -> CompletionWait.failFast(TIMEOUT).await(List.of()))
                .expectSubscription()
                .verifyComplete();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    List<TransferStatus> done = List.of(ScriptedStatus.succeedsAt(clock, Duration.ZERO));
                    return CompletionWait.failFast(TIMEOUT).await(done);
                })
                .expectSubscription()
                .verifyComplete();
    }

    @Test
    void aCancelledWaitStopsQuerying() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ScriptedStatus status = ScriptedStatus.never(clock);
        Disposable wait = CompletionWait.failFast(TIMEOUT).scheduler(clock).await(List.of(status)).subscribe();
        clock.advanceTimeBy(Duration.ofMillis(100));
        int atCancel = status.queries();

        wait.dispose();
        clock.advanceTimeBy(Duration.ofSeconds(10));

        assertThat(atCancel).isEqualTo(11);
        assertThat(status.queries()).isEqualTo(atCancel);
    }

    @Test
    void badTimeoutsAreRejectedWithAClearMessage() {
        assertThatThrownBy(() -> CompletionWait.failFast(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("greater than zero");
        assertThatThrownBy(() -> CompletionWait.drain(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("greater than zero");
        assertThatThrownBy(() -> CompletionWait.failFast(Duration.ofDays(400)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("24 hours");
    }
}
