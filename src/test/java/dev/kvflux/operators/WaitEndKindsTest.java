package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.TransferException.Kind;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Each way a wait ends without success carries its kind, whatever the wait. */
class WaitEndKindsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(3);

    /** The waits that run on a scheduler, each by the name a failure message shows. */
    private static final Map<String, WaitStrategy> REACTIVE = Map.of(
            "completion fail-fast", CompletionWait.failFast(TIMEOUT),
            "completion drain", CompletionWait.drain(TIMEOUT),
            "shared-poll fail-fast", CompletionWait.failFast(TIMEOUT).sharedPoll(),
            "shared-poll drain", CompletionWait.drain(TIMEOUT).sharedPoll(),
            "push fail-fast", PushWait.failFast(TIMEOUT),
            "push drain", PushWait.drain(TIMEOUT));

    /** Runs {@code wait} over the statuses in virtual time to its error and checks its kind and code. */
    private static void endsWith(String name, WaitStrategy wait,
                                 Function<VirtualTimeScheduler, List<TransferStatus>> statuses,
                                 Kind kind, StatusCode code) {
        StepVerifier.withVirtualTime(() -> wait.await(statuses.apply(VirtualTimeScheduler.get())))
                .expectSubscription()
                .thenAwait(TIMEOUT)
                .expectErrorSatisfies(e -> assertThat(e).as(name).isInstanceOfSatisfying(TransferException.class, t -> {
                    assertThat(t.kind()).as(name).isEqualTo(kind);
                    assertThat(t.code()).as(name).isEqualTo(code);
                    assertThat(t.isStall()).as(name).isEqualTo(kind == Kind.STALLED);
                    assertThat(t.isTimeout()).as(name).isEqualTo(kind != Kind.FAILED);
                }))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aFailedStatusEndsEveryReactiveWaitWithKindFailed() {
        REACTIVE.forEach((name, wait) -> endsWith(name, wait, clock -> List.of(
                        ScriptedStatus.failsAt(clock, Duration.ofMillis(40), StatusCode.ERR_RDMA_OP, "nic"),
                        ScriptedStatus.succeedsAt(clock, Duration.ofMillis(90))),
                Kind.FAILED, StatusCode.ERR_RDMA_OP));
    }

    @Test
    void statusesInFlightAtTheTimeoutEndEveryReactiveWaitWithKindTimedOut() {
        REACTIVE.forEach((name, wait) -> endsWith(name, wait, clock -> List.of(ScriptedStatus.never(clock)),
                Kind.TIMED_OUT, StatusCode.IN_PROGRESS));
    }

    @Test
    void aStatusThatBreaksTheContractEndsEveryReactiveWaitWithKindFailed() {
        TransferStatus broken = new TransferStatus() {
            @Override
            public StatusCode code() {
                return null;
            }

            @Override
            public String message() {
                return "";
            }
        };
        REACTIVE.forEach((name, wait) -> endsWith(name, wait, clock -> List.of(broken),
                Kind.FAILED, StatusCode.ERR_BAD_STATE));
    }

    @Test
    void aStallEndsBothCompletionWaitsWithKindStalled() {
        Map.of("completion", CompletionWait.failFast(TIMEOUT).stallAfter(Duration.ofSeconds(1)),
                        "shared-poll", CompletionWait.failFast(TIMEOUT).stallAfter(Duration.ofSeconds(1)).sharedPoll())
                .forEach((name, wait) -> endsWith(name, wait, clock -> List.of(
                                ScriptedStatus.succeedsAt(clock, Duration.ofMillis(50)), ScriptedStatus.never(clock)),
                        Kind.STALLED, StatusCode.IN_PROGRESS));
    }

    @Test
    void theNativeWaitsTimeoutHasKindTimedOutAndAFailureKindFailed() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        List<WaitStrategy> waits = List.of(NativeWait.of(engine, TIMEOUT),
                SlicedNativeWait.failFast(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock));
        for (WaitStrategy wait : waits) {
            TransferException timedOut = catchThrowableOfType(TransferException.class,
                    () -> wait.await(List.of(ScriptedStatus.never(clock))).block(Duration.ofSeconds(5)));
            TransferException failed = catchThrowableOfType(TransferException.class,
                    () -> wait.await(List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "bad")))
                            .block(Duration.ofSeconds(5)));

            assertThat(timedOut.kind()).as(wait.strategyName()).isEqualTo(Kind.TIMED_OUT);
            assertThat(failed.kind()).as(wait.strategyName()).isEqualTo(Kind.FAILED);
            assertThat(failed.code()).as(wait.strategyName()).isEqualTo(StatusCode.ERR_GPU_OP);
        }
    }

    @Test
    void anErrorBuiltFromACodeIsTimedOutForInProgressAndFailedOtherwise() {
        assertThat(new TransferException(StatusCode.IN_PROGRESS, "late").kind()).isEqualTo(Kind.TIMED_OUT);
        assertThat(new TransferException(StatusCode.ERR_BAD_STATE, "layer 3 never ready").kind()).isEqualTo(Kind.FAILED);
        assertThat(new TransferException(StatusCode.IN_PROGRESS, "RDMA transfer stalled: no status completed for 1s")
                .isStall()).as("a stall is a kind, not a message").isFalse();
    }
}
