package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The adaptive poll, in virtual time: every test of the polled wait's contract (inherited: statuses that do not
 * tell their bytes are polled every slice), then the dense window around the predicted end, its cost in queries,
 * and how the rate is learnt.
 */
class AdaptiveCompletionWaitTest extends CompletionWaitTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final long BYTES = 1_000_000;
    /** BYTES in 200 ms. */
    private static final double RATE = 5_000_000;
    private static final Duration HALF_MS = Duration.ofNanos(500_000);

    @Override
    CompletionWait failFast(Duration timeout) {
        return CompletionWait.failFast(timeout).adaptive();
    }

    @Override
    CompletionWait drain(Duration timeout) {
        return CompletionWait.drain(timeout).adaptive();
    }

    @Test
    void withAKnownRateTheWaitEndsWithinADensePeriodOfTheLastCopyWhereThePolledWaitEndsASliceLater() {
        CompletionWait adaptive = CompletionWait.failFast(TIMEOUT).adaptive(CopyRate.startingAt(RATE));
        CompletionWait polled = CompletionWait.failFast(TIMEOUT);

        StepVerifier.withVirtualTime(() -> adaptive.await(List.of(
                        ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(200).plusNanos(200_000))
                                .moving(BYTES))))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(200))
                .thenAwait(HALF_MS)
                .verifyComplete();
        StepVerifier.withVirtualTime(() -> polled.await(List.of(
                        ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(200).plusNanos(200_000))
                                .moving(BYTES))))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(209))
                .thenAwait(Duration.ofMillis(1))
                .verifyComplete();
    }

    @Test
    void itQueriesDenselyOnlyInTheWindowAroundThePredictedEnd() {
        AtomicReference<ScriptedStatus> status = new AtomicReference<>();
        StepVerifier.withVirtualTime(() -> {
                    status.set(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofNanos(200_200_000))
                            .moving(BYTES));
                    return CompletionWait.failFast(TIMEOUT).adaptive(CopyRate.startingAt(RATE)).await(List.of(status.get()));
                })
                .expectSubscription()
                .thenAwait(Duration.ofMillis(201))
                .verifyComplete();

        // One query at subscription, 18 slices up to 180 ms, then every 0.5 ms from 187.5 ms (200 ms less a
        // sixteenth) to 200.5 ms: 46 queries, against 401 for polling every 0.5 ms throughout and 22 for the slices.
        assertThat(status.get().queries()).isEqualTo(46);
    }

    @Test
    void aFirstWaitWithNothingLearntPollsEverySliceAndTeachesTheRateTheNextOneUses() {
        CopyRate rate = CopyRate.learned();
        CompletionWait wait = CompletionWait.failFast(TIMEOUT).adaptive(rate);

        StepVerifier.withVirtualTime(() -> wait.await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(),
                        Duration.ofNanos(200_200_000)).moving(BYTES))))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(209))
                .thenAwait(Duration.ofMillis(1))
                .verifyComplete();
        assertThat(rate.observations()).isEqualTo(1);
        // Seen done at the 210 ms slice: taken as halfway since the 200 ms one.
        assertThat(rate.bytesPerSecond()).hasValueCloseTo(BYTES / 0.205, org.assertj.core.data.Offset.offset(1.0));

        StepVerifier.withVirtualTime(() -> wait.await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(),
                        Duration.ofNanos(200_200_000)).moving(BYTES))))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(200))
                .thenAwait(Duration.ofMillis(1)) // the dense polls fall every 0.5 ms from 192.2 ms: 200.7 ms sees it
                .verifyComplete();
        assertThat(rate.observations()).isEqualTo(2);
    }

    @Test
    void aFailedOrTimedOutWaitTeachesTheRateNothing() {
        CopyRate rate = CopyRate.startingAt(RATE);
        StepVerifier.withVirtualTime(() -> CompletionWait.failFast(TIMEOUT).adaptive(rate).await(List.of(
                        ScriptedStatus.failsAt(VirtualTimeScheduler.get(), Duration.ofMillis(50), StatusCode.ERR_RDMA_OP,
                                "link down").moving(BYTES))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(60))
                .verifyErrorMatches(e -> e instanceof TransferException t && t.code() == StatusCode.ERR_RDMA_OP);
        StepVerifier.withVirtualTime(() -> CompletionWait.failFast(Duration.ofMillis(300)).adaptive(rate).await(List.of(
                        ScriptedStatus.never(VirtualTimeScheduler.get()).moving(BYTES))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(300))
                .verifyErrorMatches(e -> e instanceof TransferException t && t.kind() == TransferException.Kind.TIMED_OUT);

        assertThat(rate.observations()).isZero();
        assertThat(rate.bytesPerSecond()).hasValue(RATE);
    }

    @Test
    void itReportsAsReactiveAdaptiveAndRefusesABadRate() {
        assertThat(CompletionWait.failFast(TIMEOUT).adaptive().strategyName()).isEqualTo(WaitStrategy.REACTIVE_ADAPTIVE);
        assertThat(CompletionWait.failFast(TIMEOUT).adaptive().sharedPoll().copyRate()).isEmpty();
        assertThatThrownBy(() -> CopyRate.startingAt(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("positive");
        assertThatThrownBy(() -> CompletionWait.failFast(TIMEOUT).adaptive(null)).isInstanceOf(NullPointerException.class);
    }
}
