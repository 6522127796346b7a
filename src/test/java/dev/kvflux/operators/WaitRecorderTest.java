package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.ListenedStatus;
import dev.kvflux.testing.RecordingEngine;
import dev.kvflux.testing.RecordingWaitRecorder;
import dev.kvflux.testing.RecordingWaitRecorder.Ended;
import dev.kvflux.testing.RecordingWaitRecorder.Polled;
import dev.kvflux.testing.ScheduledPushStatus;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** What each wait strategy reports to its {@link WaitRecorder}, for each way a wait ends, in virtual time. */
class WaitRecorderTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(1);

    /** A wait, its metrics name, and how it makes statuses that succeed or fail at a time. */
    private record Case(String name, Function<FailMode, WaitStrategy> strategy, boolean push) {
        TransferStatus succeedsAt(Scheduler clock, long ms) {
            return push ? ScheduledPushStatus.succeedsAt(clock, Duration.ofMillis(ms))
                    : ScriptedStatus.succeedsAt(clock, Duration.ofMillis(ms));
        }

        TransferStatus failsAt(Scheduler clock, long ms, StatusCode code) {
            return push ? ScheduledPushStatus.failsAt(clock, Duration.ofMillis(ms), code)
                    : ScriptedStatus.failsAt(clock, Duration.ofMillis(ms), code, "copy failed");
        }
    }

    private static final List<Case> REACTIVE = List.of(
            new Case("reactive", mode -> CompletionWait.of(mode, TIMEOUT), false),
            new Case("reactive-shared", mode -> CompletionWait.of(mode, TIMEOUT).sharedPoll(), false),
            new Case("reactive-push", mode -> mode == FailMode.FAIL_FAST ? PushWait.failFast(TIMEOUT)
                    : PushWait.drain(TIMEOUT), true));

    /** Runs {@code test} once per reactive wait with a fresh recorder, naming the wait in failures. */
    private static void forEachReactive(java.util.function.BiConsumer<Case, RecordingWaitRecorder> test) {
        for (Case c : REACTIVE) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            try {
                test.accept(c, recorder);
            } catch (AssertionError e) {
                throw new AssertionError(c.name() + ": " + e.getMessage(), e);
            }
        }
    }

    @Test
    void aPollingWaitThatFinishesReportsItsStatusesEachSettlingPollsQueriesLagAndDurationInThatOrder() {
        for (Case c : REACTIVE.subList(0, 2)) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder)
                            .await(List.of(c.succeedsAt(VirtualTimeScheduler.get(), 30),
                                    c.succeedsAt(VirtualTimeScheduler.get(), 45))))
                    .expectSubscription()
                    .thenAwait(Duration.ofMillis(50))
                    .verifyComplete();

            assertThat(recorder.started).as(c.name()).containsExactly(c.name());
            assertThat(recorder.startedStatuses).as(c.name()).containsExactly(2);
            assertThat(recorder.inFlightChanges).as(c.name()).containsExactly(2, -1, -1);
            // Polls at 0, 10, 20, 30 (both queried), 40 and 50 (only the second).
            assertThat(recorder.polls).as(c.name()).containsExactly(new Polled(c.name(), 6, 10));
            assertThat(recorder.lags).as(c.name() + ": the second copy ended at 45 ms, seen at 50 ms")
                    .containsExactly(Duration.ofMillis(5));
            assertThat(recorder.failures).as(c.name()).isEmpty();
            assertThat(recorder.theEnd()).as(c.name()).isEqualTo(new Ended(c.name(), WaitOutcome.DONE, Duration.ofMillis(50)));
            assertThat(recorder.order).as(c.name())
                    .containsExactly("started", "inFlight", "inFlight", "inFlight", "polls", "lag", "ended");
        }
    }

    @Test
    void aPushWaitThatFinishesReportsOneQueryRoundEachPushAndNoLagBeyondThePush() {
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(TIMEOUT).recorder(recorder)
                        .await(List.of(ScheduledPushStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(30)),
                                ScheduledPushStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(45)))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(45))
                .verifyComplete();

        assertThat(recorder.started).containsExactly("reactive-push");
        assertThat(recorder.inFlightChanges).containsExactly(2, -1, -1);
        assertThat(recorder.polls).containsExactly(new Polled("reactive-push", 1, 2));
        assertThat(recorder.lags).containsExactly(Duration.ZERO);
        assertThat(recorder.theEnd()).isEqualTo(new Ended("reactive-push", WaitOutcome.DONE, Duration.ofMillis(45)));
    }

    @Test
    void aPushWaitsLagCountsFromTheCopiesThatEndedLastNotFromTheStatusPushedLast() {
        for (boolean direct : new boolean[] {false, true}) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            VirtualTimeScheduler time = VirtualTimeScheduler.create();
            ListenedStatus early = ListenedStatus.endedAt(time, 20);
            ListenedStatus latest = ListenedStatus.endedAt(time, 40);
            ListenedStatus middle = ListenedStatus.endedAt(time, 30);
            PushWait wait = PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder);
            StepVerifier.create((direct ? wait.signalOnPush() : wait).await(List.of(early, latest, middle)))
                    .expectSubscription()
                    .then(() -> time.advanceTimeTo(java.time.Instant.ofEpochMilli(42)))
                    .then(middle::push)
                    .then(() -> time.advanceTimeTo(java.time.Instant.ofEpochMilli(45)))
                    .then(latest::push)
                    .then(() -> time.advanceTimeTo(java.time.Instant.ofEpochMilli(50)))
                    .then(early::push)
                    .then(() -> time.advanceTimeBy(Duration.ZERO))
                    .verifyComplete();

            assertThat(recorder.lags).as("direct " + direct + ": the last copies ended at 40 ms, the wait ended at 50 ms")
                    .containsExactly(Duration.ofMillis(10));
        }
    }

    @Test
    void aPushWaitsLagCountsTheCopiesOfStatusesThatSaidTheySettledBeforeItBegan() {
        for (boolean direct : new boolean[] {false, true}) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            VirtualTimeScheduler time = VirtualTimeScheduler.create();
            ListenedStatus early = ListenedStatus.endedAt(time, 20).sayingWhenSettled();
            ListenedStatus latest = ListenedStatus.endedAt(time, 40).sayingWhenSettled();
            ListenedStatus pushedLater = ListenedStatus.endedAt(time, 30).sayingWhenSettled();
            early.code = StatusCode.SUCCESS;
            latest.code = StatusCode.SUCCESS;
            PushWait wait = PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder);
            StepVerifier.create((direct ? wait.signalOnPush() : wait).await(List.of(early, latest, pushedLater)))
                    .expectSubscription()
                    .then(() -> time.advanceTimeTo(java.time.Instant.ofEpochMilli(45)))
                    .then(pushedLater::push)
                    .then(() -> time.advanceTimeBy(Duration.ZERO))
                    .verifyComplete();

            assertThat(recorder.lags).as("direct " + direct + ": the last copies, settled before the wait, ended at 40"
                    + " ms; the wait ended at 45 ms").containsExactly(Duration.ofMillis(5));
            assertThat(recorder.inFlightChanges.stream().mapToInt(Integer::intValue).sum())
                    .as("every status left flight once: " + recorder.inFlightChanges).isZero();
            assertThat(recorder.inFlightChanges.getFirst()).isEqualTo(3);
        }

        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        ListenedStatus unknown = ListenedStatus.endedAt(time, -1).sayingWhenSettled();
        unknown.code = StatusCode.SUCCESS;
        ListenedStatus known = ListenedStatus.endedAt(time, 20).sayingWhenSettled();
        StepVerifier.create(PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder).signalOnPush()
                        .await(List.of(unknown, known)))
                .expectSubscription()
                .then(known::push)
                .verifyComplete();
        assertThat(recorder.lags).as("one settled status could not tell when its copies ended").isEmpty();
    }

    @Test
    void aFailFastPushWaitThatFindsASettledFailureAfterSettledSuccessesReportsEachStatusLeavingFlightOnce() {
        for (boolean direct : new boolean[] {false, true}) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            ListenedStatus first = new ListenedStatus().sayingWhenSettled();
            first.code = StatusCode.SUCCESS;
            ListenedStatus second = new ListenedStatus().sayingWhenSettled();
            second.code = StatusCode.SUCCESS;
            ListenedStatus failed = new ListenedStatus().sayingWhenSettled();
            failed.code = StatusCode.ERR_RDMA_OP;
            ListenedStatus inFlight = new ListenedStatus().sayingWhenSettled();
            PushWait wait = PushWait.failFast(TIMEOUT).recorder(recorder);
            StepVerifier.create((direct ? wait.signalOnPush() : wait).await(List.of(first, second, failed, inFlight)))
                    .expectErrorMatches(e -> e instanceof TransferException t && t.code() == StatusCode.ERR_RDMA_OP)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.inFlight()).as("direct " + direct + ": every status left flight once, the two found"
                    + " settled before the failure included: " + recorder.inFlightChanges).isZero();
            assertThat(recorder.failures).containsExactly(StatusCode.ERR_RDMA_OP);
            assertThat(recorder.theEnd().outcome()).isEqualTo(WaitOutcome.FAILED);
            assertThat(first.listenersGiven.get() + second.listenersGiven.get() + failed.listenersGiven.get()).isZero();
        }
    }

    @Test
    void aPushWaitReportsNoLagWhenOneStatusCannotTellWhenItsCopiesEnded() {
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        ListenedStatus known = ListenedStatus.endedAt(time, 20);
        ListenedStatus unknown = ListenedStatus.endedAt(time, -1);
        StepVerifier.create(PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder).signalOnPush()
                        .await(List.of(known, unknown)))
                .expectSubscription()
                .then(unknown::push)
                .then(known::push)
                .verifyComplete();

        assertThat(recorder.lags).isEmpty();
        assertThat(recorder.theEnd().outcome()).isEqualTo(WaitOutcome.DONE);
    }

    @Test
    void aPushWaitReportsTheLagOfAStatusWhoseEndItLearnedOnlyAfterItSettled() {
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        ListenedStatus first = ListenedStatus.endedAt(time, -1);
        ListenedStatus second = ListenedStatus.endedAt(time, 20);
        StepVerifier.create(PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder).signalOnPush()
                        .await(List.of(first, second)))
                .expectSubscription()
                .then(() -> time.advanceTimeTo(java.time.Instant.ofEpochMilli(35)))
                .then(first::push) // its copies' end not known yet, as a backend may learn it a little later
                .then(() -> first.endNanos = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(30))
                .then(second::push)
                .verifyComplete();

        assertThat(recorder.lags).as("the first's copies ended last, at 30 ms; the wait ended at 35 ms")
                .containsExactly(Duration.ofMillis(5));
    }

    @Test
    void aPushWaitCancelledAsItIsSubscribedReportsItsStartThenItsEndAndGivesEveryStatusBack() {
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder)
                .await(List.of(ListenedStatus.endedAt(time, -1), ListenedStatus.endedAt(time, -1)))
                .subscribe(new reactor.core.publisher.BaseSubscriber<Void>() {
                    @Override
                    protected void hookOnSubscribe(org.reactivestreams.Subscription subscription) {
                        cancel();
                    }
                });

        assertThat(recorder.order).first().isEqualTo("started");
        assertThat(recorder.order).last().isEqualTo("ended");
        assertThat(recorder.inFlight()).as("both statuses given back").isZero();
        assertThat(recorder.theEnd().outcome()).isEqualTo(WaitOutcome.CANCELLED);
    }

    @Test
    void aPushAfterAFailFastWaitEndedIsNotReportedAgain() {
        for (boolean direct : new boolean[] {false, true}) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            VirtualTimeScheduler time = VirtualTimeScheduler.create();
            ListenedStatus failing = ListenedStatus.endedAt(time, -1);
            ListenedStatus other = ListenedStatus.endedAt(time, -1);
            PushWait wait = PushWait.failFast(TIMEOUT).scheduler(time).recorder(recorder);
            // the subscriber aborts the rest of the request on the thread that tells it, as a role does
            (direct ? wait.signalOnPush() : wait).await(List.of(failing, other))
                    .subscribe(null, e -> other.push(StatusCode.ERR_GPU_OP));
            failing.push(StatusCode.ERR_RDMA_OP);
            time.advanceTimeBy(Duration.ZERO);

            assertThat(recorder.order).as("direct " + direct).last().isEqualTo("ended");
            assertThat(recorder.inFlight()).as("direct " + direct + ": every status left flight once").isZero();
            assertThat(recorder.failures).as("direct " + direct).containsExactly(StatusCode.ERR_RDMA_OP);
        }
    }

    @Test
    void aFailFastWaitReportsTheFailedCodeAndGivesBackTheStatusesStillInFlight() {
        forEachReactive((c, recorder) -> {
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder)
                            .await(List.of(c.failsAt(VirtualTimeScheduler.get(), 40, StatusCode.ERR_RDMA_OP),
                                    ScriptedStatus.never(VirtualTimeScheduler.get()))))
                    .expectSubscription()
                    .thenAwait(Duration.ofMillis(40))
                    .expectError(TransferException.class)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.failures).containsExactly(StatusCode.ERR_RDMA_OP);
            assertThat(recorder.inFlightChanges).containsExactly(2, -1, -1);
            assertThat(recorder.lags).isEmpty();
            assertThat(recorder.theEnd()).isEqualTo(new Ended(c.name(), WaitOutcome.FAILED, Duration.ofMillis(40)));
        });
    }

    @Test
    void aDrainWaitReportsItsFailureOnceNothingIsInFlightAndNoLag() {
        forEachReactive((c, recorder) -> {
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.DRAIN).recorder(recorder)
                            .await(List.of(c.failsAt(VirtualTimeScheduler.get(), 40, StatusCode.ERR_GPU_OP),
                                    c.succeedsAt(VirtualTimeScheduler.get(), 90))))
                    .expectSubscription()
                    .thenAwait(Duration.ofMillis(90))
                    .expectError(TransferException.class)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.failures).containsExactly(StatusCode.ERR_GPU_OP);
            assertThat(recorder.inFlightChanges).containsExactly(2, -1, -1);
            assertThat(recorder.lags).as("a failed wait has no detection lag").isEmpty();
            assertThat(recorder.theEnd()).isEqualTo(new Ended(c.name(), WaitOutcome.FAILED, Duration.ofMillis(90)));
        });
    }

    @Test
    void aWaitAtItsTimeoutReportsTimedOutAndGivesBackEveryStatus() {
        forEachReactive((c, recorder) -> {
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder)
                            .await(List.of(ScriptedStatus.never(VirtualTimeScheduler.get()),
                                    c.succeedsAt(VirtualTimeScheduler.get(), 20))))
                    .expectSubscription()
                    .thenAwait(TIMEOUT)
                    .expectError(TransferException.class)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.inFlight()).isZero();
            assertThat(recorder.inFlightChanges).containsExactly(2, -1, -1);
            assertThat(recorder.failures).isEmpty();
            assertThat(recorder.lags).isEmpty();
            assertThat(recorder.theEnd()).isEqualTo(new Ended(c.name(), WaitOutcome.TIMED_OUT, TIMEOUT));
        });
    }

    @Test
    void aStalledWaitReportsStalledWhenItSawTheStall() {
        for (Case c : REACTIVE) {
            RecordingWaitRecorder recorder = new RecordingWaitRecorder();
            StepVerifier.withVirtualTime(() -> (c.strategy().apply(FailMode.FAIL_FAST) instanceof CompletionWait w
                            ? w.stallAfter(Duration.ofMillis(200)) : ((PushWait) c.strategy().apply(FailMode.FAIL_FAST))
                            .stallAfter(Duration.ofMillis(200))).recorder(recorder)
                            .await(List.of(c.succeedsAt(VirtualTimeScheduler.get(), 50),
                                    ScriptedStatus.never(VirtualTimeScheduler.get()))))
                    .expectSubscription()
                    .thenAwait(Duration.ofMillis(250))
                    .expectError(TransferException.class)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.inFlightChanges).as(c.name()).containsExactly(2, -1, -1);
            assertThat(recorder.theEnd()).as(c.name())
                    .isEqualTo(new Ended(c.name(), WaitOutcome.STALLED, Duration.ofMillis(250)));
        }
    }

    @Test
    void aCancelledWaitReportsCancelledOnceAndGivesBackItsStatuses() {
        forEachReactive((c, recorder) -> {
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder)
                            .await(List.of(c.succeedsAt(VirtualTimeScheduler.get(), 10),
                                    ScriptedStatus.never(VirtualTimeScheduler.get()))))
                    .expectSubscription()
                    .thenAwait(Duration.ofMillis(25))
                    .thenCancel()
                    .verify(Duration.ofSeconds(5));
            VirtualTimeScheduler.getOrSet().advanceTimeBy(TIMEOUT);

            assertThat(recorder.inFlight()).isZero();
            assertThat(recorder.theEnd()).isEqualTo(new Ended(c.name(), WaitOutcome.CANCELLED, Duration.ofMillis(25)));
        });
    }

    @Test
    void aWaitWhoseStatusesAreDoneAtSubscriptionReportsOnePollAndAZeroDuration() {
        forEachReactive((c, recorder) -> {
            StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder)
                            .await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ZERO))))
                    .expectSubscription()
                    .verifyComplete();

            assertThat(recorder.polls).containsExactly(new Polled(c.name(), 1, 1));
            assertThat(recorder.lags).containsExactly(Duration.ZERO);
            assertThat(recorder.theEnd()).isEqualTo(new Ended(c.name(), WaitOutcome.DONE, Duration.ZERO));
        });
    }

    @Test
    void aNullStatusIsReportedAsAFailedWaitWithErrBadState() {
        forEachReactive((c, recorder) -> {
            List<TransferStatus> withNull = new ArrayList<>();
            withNull.add(null);
            StepVerifier.create(c.strategy().apply(FailMode.FAIL_FAST).recorder(recorder).await(withNull))
                    .expectError(TransferException.class)
                    .verify(Duration.ofSeconds(5));

            assertThat(recorder.failures).containsExactly(StatusCode.ERR_BAD_STATE);
            assertThat(recorder.inFlight()).isZero();
            assertThat(recorder.theEnd().outcome()).isEqualTo(WaitOutcome.FAILED);
        });
    }

    @Test
    void aRecorderThatThrowsChangesNothingAboutHowTheWaitEnds() {
        WaitRecorder throwing = new WaitRecorder() {
            @Override
            public void recordWaitStarted(String strategy, int statuses) {
                throw new IllegalStateException("broken recorder");
            }

            @Override
            public void recordStatusesInFlight(String strategy, int change) {
                throw new IllegalStateException("broken recorder");
            }

            @Override
            public void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
                throw new IllegalStateException("broken recorder");
            }
        };
        forEachReactive((c, unused) -> StepVerifier.withVirtualTime(() -> c.strategy().apply(FailMode.FAIL_FAST)
                        .recorder(throwing).await(List.of(c.succeedsAt(VirtualTimeScheduler.get(), 30))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(30))
                .verifyComplete());
    }

    @Test
    void theNativeWaitsReportTheirStatusesAtStartAndEndTheirWaitAllCallsAndTheirFailures() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        RecordingEngine engine = new RecordingEngine(clock);
        Map<String, WaitStrategy> waits = new LinkedHashMap<>();
        waits.put("native", NativeWait.of(engine, TIMEOUT).scheduler(Schedulers.immediate()));
        waits.put("sliced-native", SlicedNativeWait.failFast(engine, TIMEOUT).scheduler(Schedulers.immediate()).clock(clock));
        waits.forEach((name, wait) -> {
            RecordingWaitRecorder done = new RecordingWaitRecorder();
            wait.recorder(done).await(List.of(ScriptedStatus.succeedsAt(clock, Duration.ofMillis(25)))).block();
            RecordingWaitRecorder failed = new RecordingWaitRecorder();
            wait.recorder(failed).await(List.of(ScriptedStatus.failsAt(clock, Duration.ZERO, StatusCode.ERR_GPU_OP, "x"),
                    ScriptedStatus.never(clock))).onErrorComplete().block();
            RecordingWaitRecorder timedOut = new RecordingWaitRecorder();
            wait.recorder(timedOut).await(List.of(ScriptedStatus.never(clock))).onErrorComplete().block();

            assertThat(done.inFlightChanges).as(name).containsExactly(1, -1);
            assertThat(done.theEnd().outcome()).as(name).isEqualTo(WaitOutcome.DONE);
            assertThat(done.lags).as(name).hasSize(1);
            assertThat(done.polls).as(name).hasSize(1);
            if (name.equals("native")) {
                assertThat(done.polls.get(0).polls()).as("one waitAll").isEqualTo(1);
            } else {
                assertThat(done.polls.get(0).polls()).as("a waitAll per slice until 25 ms").isEqualTo(3);
            }
            assertThat(failed.failures).as(name).containsExactly(StatusCode.ERR_GPU_OP);
            assertThat(failed.inFlightChanges).as(name).containsExactly(2, -2);
            assertThat(failed.theEnd().outcome()).as(name).isEqualTo(WaitOutcome.FAILED);
            assertThat(timedOut.theEnd().outcome()).as(name).isEqualTo(WaitOutcome.TIMED_OUT);
            assertThat(timedOut.failures).as(name).isEmpty();
        });
    }

    @Test
    void aStrategyFromElsewhereIsRecordedAroundItsWait() {
        WaitStrategy custom = new WaitStrategy() {
            @Override
            public String strategyName() {
                return "custom";
            }

            @Override
            public Mono<Void> await(List<? extends TransferStatus> statuses) {
                return Mono.delay(Duration.ofMillis(20)).then();
            }
        };
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        StepVerifier.withVirtualTime(() -> custom.recorder(recorder)
                        .await(List.of(ScriptedStatus.succeedsAt(VirtualTimeScheduler.get(), Duration.ofMillis(5)))))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(20))
                .verifyComplete();

        assertThat(recorder.started).containsExactly("custom");
        assertThat(recorder.inFlightChanges).containsExactly(1, -1);
        assertThat(recorder.theEnd()).isEqualTo(new Ended("custom", WaitOutcome.DONE, Duration.ofMillis(20)));
        assertThat(custom.recorder(recorder).recorder(WaitRecorder.NOOP)).as("NOOP gives the bare strategy back")
                .isSameAs(custom);
    }
}
