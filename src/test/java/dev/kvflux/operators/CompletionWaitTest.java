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
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.publisher.TestPublisher;
import reactor.test.scheduler.VirtualTimeScheduler;

class CompletionWaitTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final Duration SLICE = Duration.ofMillis(10);

    /** The fail-fast wait under test; a subclass runs every test here on another variant. */
    CompletionWait failFast(Duration timeout) {
        return CompletionWait.failFast(timeout);
    }

    /** The draining wait under test. */
    CompletionWait drain(Duration timeout) {
        return CompletionWait.drain(timeout);
    }

    private static boolean isTransfer(Throwable e, StatusCode code) {
        return e instanceof TransferException t && t.code() == code;
    }

    @Test
    void completesWithinOneSliceOfTheLastCompletion() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return failFast(TIMEOUT).await(List.of(
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
                    return failFast(TIMEOUT).await(List.of(
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
                    return drain(TIMEOUT).await(List.of(
                            ScriptedStatus.failsAt(clock, Duration.ofMillis(20), StatusCode.ERR_RDMA_OP, "nic"),
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(500))));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(500))
                .expectErrorSatisfies(e -> assertThat(isTransfer(e, StatusCode.ERR_RDMA_OP)).isTrue())
                .verify();
    }

    @Test
    void timeoutFiresAtTransferTimeoutWithMoriiosTimeoutMessage() {
        StepVerifier.withVirtualTime(() -> failFast(TIMEOUT)
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
        StepVerifier.withVirtualTime(() -> failFast(TIMEOUT).await(List.of()))
                .expectSubscription()
                .verifyComplete();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    List<TransferStatus> done = List.of(ScriptedStatus.succeedsAt(clock, Duration.ZERO));
                    return failFast(TIMEOUT).await(done);
                })
                .expectSubscription()
                .verifyComplete();
    }

    @Test
    void aCancelledWaitStopsQuerying() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ScriptedStatus status = ScriptedStatus.never(clock);
        Disposable wait = failFast(TIMEOUT).scheduler(clock).await(List.of(status)).subscribe();
        clock.advanceTimeBy(Duration.ofMillis(100));
        int atCancel = status.queries();

        wait.dispose();
        clock.advanceTimeBy(Duration.ofSeconds(10));

        assertThat(atCancel).isEqualTo(11);
        assertThat(status.queries()).isEqualTo(atCancel);
    }

    @Test
    void aStalledTransferFailsAtItsStallTimeNotAtTheTransferTimeout() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return failFast(TIMEOUT).stallAfter(Duration.ofSeconds(1)).await(List.of(
                            ScriptedStatus.succeedsAt(clock, Duration.ofMillis(50)),
                            ScriptedStatus.never(clock),
                            ScriptedStatus.never(clock)));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(1049))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOfSatisfying(TransferException.class, t -> {
                        assertThat(t.isStall()).isTrue();
                        assertThat(t.kind()).isEqualTo(TransferException.Kind.STALLED);
                        assertThat(t.code()).isEqualTo(StatusCode.IN_PROGRESS);
                    });
                    assertThat(e).hasMessage("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer"
                            + " stalled: no status completed for 1s, 2 of 3 statuses still in flight");
                })
                .verify();
    }

    @Test
    void aSlowTransferThatKeepsCompletingStatusesIsNotAStall() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    List<TransferStatus> statuses = java.util.stream.IntStream.rangeClosed(1, 10)
                            .mapToObj(i -> (TransferStatus) ScriptedStatus.succeedsAt(clock, Duration.ofMillis(800L * i)))
                            .toList();
                    return failFast(TIMEOUT).stallAfter(Duration.ofSeconds(1)).await(statuses);
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(7999))
                .thenAwait(Duration.ofMillis(1))
                .verifyComplete();
    }

    @Test
    void theTimeoutErrorIsNotAStall() {
        StepVerifier.withVirtualTime(() -> failFast(Duration.ofSeconds(3))
                        .await(List.of(ScriptedStatus.never(VirtualTimeScheduler.get()))))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(3))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(TransferException.class,
                        t -> {
                            assertThat(t.isStall()).isFalse();
                            assertThat(t.kind()).isEqualTo(TransferException.Kind.TIMED_OUT);
                        }))
                .verify();
    }

    @Test
    void awaitAllWaitsForTheStatusesAPublisherEmitsOnceItCompletes() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return Flux.just(Duration.ofMillis(93), Duration.ofMillis(205))
                            .map(at -> (TransferStatus) ScriptedStatus.succeedsAt(clock, at))
                            .as(failFast(TIMEOUT)::awaitAll);
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(205))
                .thenAwait(SLICE)
                .verifyComplete();
    }

    @Test
    void awaitAllCountsTheTransferTimeoutFromThePublishersCompletion() {
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return Mono.delay(Duration.ofSeconds(1), clock)
                            .map(tick -> (TransferStatus) ScriptedStatus.never(clock))
                            .as(failFast(Duration.ofSeconds(3))::awaitAll);
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(4).minusNanos(1))
                .thenAwait(Duration.ofNanos(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(TransferException.class,
                        t -> assertThat(t.kind()).isEqualTo(TransferException.Kind.TIMED_OUT)))
                .verify();
    }

    @Test
    void awaitAllOfAnEmptyPublisherCompletesAtOnce() {
        StepVerifier.withVirtualTime(() -> failFast(TIMEOUT).awaitAll(Flux.empty()))
                .expectSubscription()
                .verifyComplete();
    }

    @Test
    void awaitAllPassesOnThePublishersErrorAsItIs() {
        IllegalStateException planFailed = new IllegalStateException("no plan for layer 3");
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    return Flux.<TransferStatus>just(ScriptedStatus.never(clock))
                            .concatWith(Mono.error(planFailed))
                            .as(failFast(TIMEOUT)::awaitAll);
                })
                .expectSubscription()
                .expectErrorSatisfies(e -> assertThat(e).isSameAs(planFailed))
                .verify();
    }

    @Test
    void cancellingAwaitAllCancelsThePublisherStillEmitting() {
        TestPublisher<TransferStatus> statuses = TestPublisher.create();
        StepVerifier.withVirtualTime(() -> statuses.flux().as(failFast(TIMEOUT)::awaitAll))
                .expectSubscription()
                .then(() -> statuses.next(ScriptedStatus.never(VirtualTimeScheduler.get())))
                .thenAwait(Duration.ofSeconds(1))
                .thenCancel()
                .verify();
        statuses.assertCancelled();
    }

    @Test
    void cancellingAwaitAllAfterThePublisherCompletedStopsQuerying() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        ScriptedStatus status = ScriptedStatus.never(clock);
        Disposable wait = Flux.<TransferStatus>just(status).as(failFast(TIMEOUT).scheduler(clock)::awaitAll).subscribe();
        clock.advanceTimeBy(Duration.ofMillis(100));
        int atCancel = status.queries();

        wait.dispose();
        clock.advanceTimeBy(Duration.ofSeconds(10));

        assertThat(atCancel).isGreaterThan(1);
        assertThat(status.queries()).isEqualTo(atCancel);
    }

    @Test
    void badTimeoutsAreRejectedWithAClearMessage() {
        assertThatThrownBy(() -> failFast(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("greater than zero");
        assertThatThrownBy(() -> drain(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("greater than zero");
        assertThatThrownBy(() -> failFast(Duration.ofDays(400)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("24 hours");
        assertThatThrownBy(() -> failFast(TIMEOUT).stallAfter(Duration.ofMillis(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("between the slice");
        assertThatThrownBy(() -> failFast(TIMEOUT).stallAfter(Duration.ofMinutes(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("transfer timeout");
    }
}
