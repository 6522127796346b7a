package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The library contract every wait keeps: a null status, or a {@code code()} that throws or returns null,
 * ends the wait with a {@link TransferException} carrying ERR_BAD_STATE and the cause.
 */
class BrokenStatusContractTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final IllegalStateException DRIVER_GONE = new IllegalStateException("driver gone");

    /** In flight until its time on the clock; from then on {@code code()} throws, or returns null. */
    private static final class BrokenStatus implements PushedStatus {
        private final Scheduler clock;
        private final long atNanos;
        private final boolean throwing;

        BrokenStatus(Scheduler clock, Duration at, boolean throwing) {
            this.clock = clock;
            this.atNanos = clock.now(TimeUnit.NANOSECONDS) + at.toNanos();
            this.throwing = throwing;
        }

        @Override
        public StatusCode code() {
            if (clock.now(TimeUnit.NANOSECONDS) < atNanos) {
                return StatusCode.IN_PROGRESS;
            }
            if (throwing) {
                throw DRIVER_GONE;
            }
            return null;
        }

        @Override
        public String message() {
            return "";
        }

        @Override
        public Mono<StatusCode> pushed() {
            return Mono.never(); // never pushes: only the deadline's last query can see it break
        }
    }

    /** A status that does not push, so every strategy polls it. */
    private static TransferStatus polled(BrokenStatus broken) {
        return new TransferStatus() {
            @Override
            public StatusCode code() {
                return broken.code();
            }

            @Override
            public String message() {
                return broken.message();
            }
        };
    }

    private static void assertBadState(Throwable e, Throwable cause) {
        assertThat(e).isInstanceOf(TransferException.class);
        assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_BAD_STATE);
        assertThat(e.getCause()).isSameAs(cause);
    }

    private static List<Function<VirtualTimeScheduler, WaitStrategy>> reactiveWaits() {
        return List.of(
                clock -> CompletionWait.failFast(TIMEOUT),
                clock -> CompletionWait.drain(TIMEOUT),
                clock -> PushWait.failFast(TIMEOUT),
                clock -> PushWait.drain(TIMEOUT));
    }

    /** Each reactive wait over {@code statuses(clock)}: the error seen and the virtual time it came at. */
    private static void eachReactiveWait(Function<VirtualTimeScheduler, List<TransferStatus>> statuses,
                                         Duration expectedAt, Throwable cause) {
        eachWait(reactiveWaits(), statuses, expectedAt, cause);
    }

    private static void eachWait(List<Function<VirtualTimeScheduler, WaitStrategy>> waits,
                                 Function<VirtualTimeScheduler, List<TransferStatus>> statuses,
                                 Duration expectedAt, Throwable cause) {
        for (Function<VirtualTimeScheduler, WaitStrategy> wait : waits) {
            var steps = StepVerifier.withVirtualTime(() -> {
                        VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                        return wait.apply(clock).await(statuses.apply(clock));
                    })
                    .expectSubscription();
            if (!expectedAt.isZero()) {
                steps = steps.expectNoEvent(expectedAt);
            }
            steps.expectErrorSatisfies(e -> assertBadState(e, cause)).verify(Duration.ofSeconds(5));
        }
    }

    @Test
    void aCodeThatThrowsEndsEveryReactiveWaitWithBadStateAndTheCause() {
        eachReactiveWait(clock -> List.of(ScriptedStatus.never(clock),
                polled(new BrokenStatus(clock, Duration.ofMillis(35), true))), Duration.ofMillis(40), DRIVER_GONE);
    }

    @Test
    void aCodeThatReturnsNullEndsEveryReactiveWaitWithBadState() {
        eachReactiveWait(clock -> List.of(ScriptedStatus.never(clock),
                polled(new BrokenStatus(clock, Duration.ofMillis(35), false))), Duration.ofMillis(40), null);
    }

    @Test
    void aBrokenStatusEndsADrainingWaitAtOnceWithoutWaitingForTheOthers() {
        // Draining would otherwise wait for the never-ending status until the 30 s timeout.
        eachWait(List.of(clock -> CompletionWait.drain(TIMEOUT), clock -> PushWait.drain(TIMEOUT)), clock -> List.of(
                ScriptedStatus.failsAt(clock, Duration.ofMillis(5), StatusCode.ERR_RDMA_OP, "nic"),
                ScriptedStatus.never(clock),
                polled(new BrokenStatus(clock, Duration.ofMillis(15), true))), Duration.ofMillis(20), DRIVER_GONE);
    }

    @Test
    void aPushedStatusThatBreaksIsCaughtByTheDeadlinesLastQuery() {
        eachWait(List.of(clock -> PushWait.failFast(TIMEOUT), clock -> PushWait.drain(TIMEOUT)),
                clock -> List.of(new BrokenStatus(clock, Duration.ofSeconds(1), true)), TIMEOUT, DRIVER_GONE);
    }

    @Test
    void aStatusBrokenAtSubscriptionEndsEveryReactiveWaitAtOnce() {
        eachReactiveWait(clock -> List.of(polled(new BrokenStatus(clock, Duration.ZERO, true))), Duration.ZERO,
                DRIVER_GONE);
    }

    @Test
    void aNullStatusInTheListEndsEveryWaitWithBadStateNotANullPointerException() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        List<TransferStatus> withNull = new ArrayList<>(Arrays.asList(ScriptedStatus.succeedsAt(clock, Duration.ZERO),
                null));
        List<WaitStrategy> waits = List.of(CompletionWait.failFast(TIMEOUT), CompletionWait.drain(TIMEOUT),
                PushWait.failFast(TIMEOUT), PushWait.drain(TIMEOUT),
                NativeWait.of(engine, TIMEOUT).scheduler(Schedulers.immediate()),
                SlicedNativeWait.failFast(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock));
        for (WaitStrategy wait : waits) {
            StepVerifier.create(wait.await(withNull))
                    .expectErrorSatisfies(e -> {
                        assertBadState(e, null);
                        assertThat(((TransferException) e).reason()).isEqualTo("status 1 of 2 is null");
                    })
                    .verify(Duration.ofSeconds(5));
        }
        assertThat(engine.timeouts).as("no engine call with a null status").isEmpty();
    }

    @Test
    void aCodeThatThrowsInsideTheEnginesWaitAllEndsTheNativeWaitsWithBadState() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        for (WaitStrategy wait : List.<WaitStrategy>of(
                NativeWait.of(engine, TIMEOUT).scheduler(Schedulers.immediate()),
                SlicedNativeWait.failFast(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock),
                SlicedNativeWait.drain(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock))) {
            StepVerifier.create(wait.await(List.of(new BrokenStatus(clock, Duration.ofMillis(35), true))))
                    .expectErrorSatisfies(e -> assertBadState(e, DRIVER_GONE))
                    .verify(Duration.ofSeconds(5));
        }
    }

    @Test
    void aCodeThatReturnsNullInsideTheEnginesWaitAllEndsTheNativeWaitsWithBadState() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        for (WaitStrategy wait : List.<WaitStrategy>of(
                NativeWait.of(engine, TIMEOUT).scheduler(Schedulers.immediate()),
                SlicedNativeWait.drain(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock))) {
            StepVerifier.create(wait.await(List.of(new BrokenStatus(clock, Duration.ofMillis(35), false))))
                    .expectErrorSatisfies(e -> assertBadState(e, null))
                    .verify(Duration.ofSeconds(5));
        }
    }
}
