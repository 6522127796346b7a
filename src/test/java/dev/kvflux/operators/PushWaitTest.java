package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.ListenedStatus;
import dev.kvflux.testing.RecordingScheduler;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.publisher.TestPublisher;
import reactor.test.scheduler.VirtualTimeScheduler;

class PushWaitTest {

    /** A status the test pushes; counts queries so a test can show nobody polled it. */
    private static final class Pushed implements PushedStatus {
        final Sinks.One<StatusCode> sink = Sinks.one();
        volatile StatusCode code = StatusCode.IN_PROGRESS;
        volatile int queries;

        void push(StatusCode terminal) {
            code = terminal;
            sink.tryEmitValue(terminal);
        }

        @Override
        public Mono<StatusCode> pushed() {
            return sink.asMono();
        }

        @Override
        public StatusCode code() {
            queries++;
            return code;
        }

        @Override
        public String message() {
            return code.isFailure() ? "copy failed" : "";
        }
    }

    @Test
    void statusesThatTakeAListenerAndHaveSettledAreNeverQueriedAndEndTheWaitAtOnce() {
        ListenedStatus done = new ListenedStatus();
        done.code = StatusCode.SUCCESS;
        ListenedStatus late = new ListenedStatus();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(done, late)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> late.push(StatusCode.SUCCESS))
                .verifyComplete();
        assertThat(done.queries).as("a query per status costs a native call on a GPU").hasValue(0);
        assertThat(late.queries).as("the one look at the newest status in flight").hasValue(1);

        ListenedStatus settled = new ListenedStatus();
        settled.code = StatusCode.SUCCESS;
        StepVerifier.create(PushWait.failFast(Duration.ofSeconds(30)).await(List.of(settled))).verifyComplete();
        assertThat(settled.queries).hasValue(0);
    }

    @Test
    void aWaitThatBeginsAfterItsLastCopiesEndedEndsAtSubscriptionWithoutWaitingForTheirPush() {
        ListenedStatus early = new ListenedStatus();
        early.code = StatusCode.SUCCESS;
        ListenedStatus before = new ListenedStatus();
        before.endWithoutPush();
        ListenedStatus last = new ListenedStatus();
        last.endWithoutPush();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30))
                        .await(List.of(early, before, last)))
                .expectSubscription()
                .expectComplete()
                .verify(Duration.ofSeconds(5)); // no push ever comes, and virtual time stands still
        assertThat(early.queries).as("settled before the wait: told by the listener, never queried").hasValue(0);
        assertThat(last.queries).hasValue(1);
        assertThat(before.queries).hasValue(1);
    }

    @Test
    void statusesThatSayTheySettledAreCountedAtSubscriptionWithoutAListenerOrAQuery() {
        ListenedStatus first = new ListenedStatus().sayingWhenSettled();
        first.code = StatusCode.SUCCESS;
        ListenedStatus second = new ListenedStatus().sayingWhenSettled();
        second.code = StatusCode.SUCCESS;
        ListenedStatus last = new ListenedStatus().sayingWhenSettled();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30))
                        .await(List.of(first, second, last)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(1)) // the two settled ones do not end it: the last is in flight
                .then(() -> last.push(StatusCode.SUCCESS))
                .verifyComplete();
        assertThat(first.listenersGiven).as("settled: a listener would only be told at once").hasValue(0);
        assertThat(second.listenersGiven).hasValue(0);
        assertThat(first.queries).hasValue(0);
        assertThat(second.queries).hasValue(0);
        assertThat(last.listenersGiven).as("in flight: its push ends the wait").hasValue(1);

        ListenedStatus a = new ListenedStatus().sayingWhenSettled();
        a.code = StatusCode.SUCCESS;
        ListenedStatus b = new ListenedStatus().sayingWhenSettled();
        b.code = StatusCode.SUCCESS;
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .expectComplete()
                .verify(Duration.ofSeconds(5)); // ended as it subscribed: no push, no timer
        assertThat(a.listenersGiven.get() + b.listenersGiven.get() + a.queries.get() + b.queries.get()).isZero();
    }

    @Test
    void aStatusThatSaysItFailedFailsAFailFastWaitAtSubscriptionAndADrainingOneOnceTheRestSettle() {
        ListenedStatus ok = new ListenedStatus().sayingWhenSettled();
        ok.code = StatusCode.SUCCESS;
        ListenedStatus failed = new ListenedStatus().sayingWhenSettled();
        failed.code = StatusCode.ERR_RDMA_OP;
        ListenedStatus inFlight = new ListenedStatus().sayingWhenSettled();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30))
                        .await(List.of(ok, failed, inFlight)))
                .expectSubscription()
                .expectErrorMatches(e -> e instanceof TransferException t && t.code() == StatusCode.ERR_RDMA_OP
                        && t.getMessage().contains("copy failed"))
                .verify(Duration.ofSeconds(5));

        ListenedStatus failedFirst = new ListenedStatus().sayingWhenSettled();
        failedFirst.code = StatusCode.ERR_RDMA_OP;
        ListenedStatus okAfter = new ListenedStatus().sayingWhenSettled();
        okAfter.code = StatusCode.SUCCESS;
        ListenedStatus last = new ListenedStatus().sayingWhenSettled();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30))
                        .await(List.of(failedFirst, okAfter, last)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(1)) // drain: the last status is still in flight
                .then(() -> last.push(StatusCode.SUCCESS))
                .expectErrorMatches(e -> e instanceof TransferException t && t.code() == StatusCode.ERR_RDMA_OP)
                .verify();
    }

    @Test
    void theLookAtSubscriptionStopsAtTheNewestStatusStillInFlight() {
        ListenedStatus first = new ListenedStatus();
        first.endWithoutPush();
        ListenedStatus second = new ListenedStatus();
        second.endWithoutPush();
        ListenedStatus last = new ListenedStatus();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30))
                        .await(List.of(first, second, last)))
                .expectSubscription()
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> last.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofSeconds(1)) // the earlier two are still awaited: their pushes end it
                .then(() -> first.push(StatusCode.SUCCESS))
                .then(() -> second.push(StatusCode.SUCCESS))
                .verifyComplete();
        assertThat(last.queries).as("the newest status in flight, looked at once").hasValue(1);
        assertThat(first.queries).as("behind a status still in flight: the copies are running").hasValue(0);
        assertThat(second.queries).hasValue(0);
    }

    @Test
    void aStatusThatTakesAListenerIsAwaitedThroughItWithoutASubscription() {
        ListenedStatus a = new ListenedStatus();
        ListenedStatus b = new ListenedStatus();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> a.push(StatusCode.SUCCESS))
                .then(() -> a.push(StatusCode.SUCCESS)) // a push racing the registration may come twice
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> b.push(StatusCode.ERR_RDMA_OP))
                .expectErrorMatches(e -> e instanceof TransferException t && t.code() == StatusCode.ERR_RDMA_OP)
                .verify();
    }

    @Test
    void theWaitEndsWhenTheLastStatusIsPushedAfterOneQueryAtSubscription() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> a.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> b.push(StatusCode.SUCCESS))
                .verifyComplete();
        assertThat(a.queries).isEqualTo(1);
        assertThat(b.queries).isEqualTo(1);
    }

    @Test
    void statusesAlreadyDoneAtSubscriptionNeedNoPush() {
        Pushed done = new Pushed();
        done.code = StatusCode.SUCCESS;
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(done)))
                .expectSubscription()
                .expectComplete()
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aPushedFailureErrorsAtOnceWithItsCodeAndMessage() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> b.push(StatusCode.ERR_GPU_OP))
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(TransferException.class);
                    assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_GPU_OP);
                    assertThat(((TransferException) e).reason()).isEqualTo("copy failed");
                })
                .verify();
    }

    @Test
    void drainErrorsOnlyOnceEveryStatusHasSettled() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> a.push(StatusCode.ERR_RDMA_OP))
                .expectNoEvent(Duration.ofMillis(500))
                .then(() -> b.push(StatusCode.SUCCESS))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_RDMA_OP))
                .verify();
    }

    @Test
    void drainReportsTheEarliestListedFailureWhateverTheOrderOfThePushes() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        Pushed c = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).await(List.of(a, b, c)))
                .expectSubscription()
                .then(() -> c.push(StatusCode.ERR_RDMA_OP))
                .then(() -> b.push(StatusCode.ERR_GPU_OP))
                .expectNoEvent(Duration.ofMillis(10))
                .then(() -> a.push(StatusCode.SUCCESS))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_GPU_OP))
                .verify();
    }

    @Test
    void drainCompletesWhenEveryStatusSucceeds() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> b.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofMillis(10))
                .then(() -> a.push(StatusCode.SUCCESS))
                .verifyComplete();
    }

    @Test
    void drainStillInFlightAtTheTimeoutReportsAFailureSeenRatherThanTheTimeout() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(3)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> a.push(StatusCode.ERR_RDMA_OP))
                .expectNoEvent(Duration.ofMillis(2999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_RDMA_OP))
                .verify();
    }

    @Test
    void aRequestIsHandedToTheSchedulerOnceHoweverManyStatusesItPushes() {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        RecordingScheduler counting = RecordingScheduler.over(time);
        List<Pushed> statuses = new java.util.ArrayList<>();
        for (int i = 0; i < 118; i++) {
            statuses.add(new Pushed());
        }
        AtomicReference<String> outcome = new AtomicReference<>();
        PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).await(statuses)
                .subscribe(null, e -> outcome.set("error"), () -> outcome.set("complete"));
        statuses.forEach(s -> s.push(StatusCode.SUCCESS));
        assertThat(outcome.get()).isEqualTo("complete");
        assertThat(counting.immediate).hasValue(1);
    }

    @Test
    void aFailFastRequestIsHandedOverOnceEvenWhenSeveralStatusesFail() {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        RecordingScheduler counting = RecordingScheduler.over(time);
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        AtomicReference<Throwable> error = new AtomicReference<>();
        PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).await(List.of(a, b)).subscribe(null, error::set);
        a.push(StatusCode.ERR_GPU_OP);
        b.push(StatusCode.ERR_RDMA_OP);
        assertThat(error.get()).isInstanceOf(TransferException.class);
        assertThat(counting.immediate).hasValue(1);
        assertThat(b.sink.currentSubscriberCount()).as("the other status's push is no longer awaited").isZero();
    }

    @Test
    void signallingOnThePushEndsTheWaitOnThePushingThreadWithoutAHandOver() throws Exception {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        RecordingScheduler counting = RecordingScheduler.over(time);
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        AtomicReference<String> completedOn = new AtomicReference<>();
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).signalOnPush();
        wait.await(List.of(a, b)).subscribe(null, null, () -> completedOn.set(Thread.currentThread().getName()));
        a.push(StatusCode.SUCCESS);
        Thread pusher = new Thread(() -> b.push(StatusCode.SUCCESS), "the-backends-push-thread");
        pusher.start();
        pusher.join();

        assertThat(completedOn.get()).isEqualTo("the-backends-push-thread");
        assertThat(counting.immediate).as("no task handed to the scheduler").hasValue(0);
        assertThat(wait.signalsOnPush()).isTrue();
        assertThat(wait.slice(Duration.ofMillis(5)).signalsOnPush()).as("kept by the withers").isTrue();
        assertThat(PushWait.failFast(Duration.ofSeconds(30)).signalsOnPush()).as("off by default").isFalse();
    }

    @Test
    void signallingOnThePushStillTimesOutOnTheScheduler() {
        Pushed never = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).signalOnPush()
                        .await(List.of(never)))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(30))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).kind())
                        .isEqualTo(TransferException.Kind.TIMED_OUT))
                .verify();
    }

    @Test
    void waitsEndingOnThePushingThreadWithinAMillisecondOfEachOtherHaveTheirTimersDisposedInOneBatch() {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        RecordingScheduler counting = RecordingScheduler.over(time);
        AtomicLong clock = new AtomicLong();
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).signalOnPush()
                .reaperClock(clock::get);
        List<Pushed> statuses = List.of(new Pushed(), new Pushed(), new Pushed());
        AtomicInteger ended = new AtomicInteger();
        for (Pushed status : statuses) {
            wait.await(List.of(status)).subscribe(null, null, ended::incrementAndGet);
        }
        assertThat(counting.delayed).as("one deadline per wait").hasSize(3);

        for (Pushed status : statuses) {
            status.push(StatusCode.SUCCESS);
            clock.addAndGet(TimeUnit.MICROSECONDS.toNanos(100));
        }
        assertThat(ended).hasValue(3);
        assertThat(counting.delayed.getFirst().isDisposed()).as("the first wait's deadline: none ended before it")
                .isTrue();
        assertThat(counting.delayed.subList(1, 3)).as("the two that ended 0.1 ms after another, not yet")
                .noneMatch(reactor.core.Disposable::isDisposed);
        time.advanceTimeBy(Duration.ofMillis(1));

        assertThat(counting.delayed.subList(1, 3)).as("the deadlines").allMatch(reactor.core.Disposable::isDisposed);
        assertThat(counting.delayed).as("the deadlines, then one disposal for the two").hasSize(4);
    }

    @Test
    void waitsEndingOnThePushingThreadFarApartDisposeTheirTimersAtOnceAskingTheSchedulerNothing() {
        RecordingScheduler counting = RecordingScheduler.over(VirtualTimeScheduler.create());
        AtomicLong clock = new AtomicLong();
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).signalOnPush()
                .reaperClock(clock::get);
        for (int i = 0; i < 3; i++) {
            Pushed status = new Pushed();
            wait.await(List.of(status)).subscribe();
            clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(5));
            status.push(StatusCode.SUCCESS);

            assertThat(counting.delayed).as("wait " + i + ": its deadline, no disposal asked for").hasSize(i + 1);
            assertThat(counting.delayed.get(i).isDisposed()).as("wait " + i + "'s deadline").isTrue();
        }
    }

    @Test
    void aBatchOfTimersWhoseDisposalNeverRunsIsDisposedByAWaitEndingOnceTheBatchIsOld() {
        // virtual time that nobody advances: the batch's disposal, a millisecond later, never runs
        RecordingScheduler counting = RecordingScheduler.over(VirtualTimeScheduler.create());
        AtomicLong clock = new AtomicLong();
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).signalOnPush()
                .reaperClock(clock::get);
        Pushed first = new Pushed();
        Pushed second = new Pushed();
        Pushed third = new Pushed();
        wait.await(List.of(first)).subscribe();
        wait.await(List.of(second)).subscribe();
        wait.await(List.of(third)).subscribe();
        first.push(StatusCode.SUCCESS); // disposed at once: nothing ended before it
        clock.addAndGet(TimeUnit.MICROSECONDS.toNanos(100));
        second.push(StatusCode.SUCCESS); // begins a batch
        assertThat(counting.delayed.get(1).isDisposed()).as("the second deadline, its batch just begun").isFalse();

        clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(150)); // past the 100 ms a batch may wait
        third.push(StatusCode.SUCCESS);

        assertThat(counting.delayed.subList(1, 3)).as("the batch's deadline and the third's")
                .allMatch(reactor.core.Disposable::isDisposed);
    }

    @Test
    void aWaitWhoseStatusesHadAllSettledArmsNoTimer() {
        RecordingScheduler counting = RecordingScheduler.over(VirtualTimeScheduler.create());
        ListenedStatus a = new ListenedStatus();
        a.code = StatusCode.SUCCESS;
        Pushed b = new Pushed();
        b.push(StatusCode.SUCCESS);

        StepVerifier.create(PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting).await(List.of(a, b)))
                .verifyComplete();

        assertThat(counting.delayed).as("no deadline armed").isEmpty();
        assertThat(counting.immediate).as("ended on the subscribing thread").hasValue(0);
    }

    @Test
    void aSubscriberThatThrowsOnTheEndStillHasTheWaitsTimersDisposed() {
        for (boolean direct : new boolean[] {false, true}) {
            VirtualTimeScheduler time = VirtualTimeScheduler.create();
            RecordingScheduler counting = RecordingScheduler.over(time);
            ListenedStatus failing = new ListenedStatus();
            ScriptedStatus polled = ScriptedStatus.never(time);
            PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(counting);
            (direct ? wait.signalOnPush() : wait).await(List.of(failing, polled))
                    .subscribe(new reactor.core.CoreSubscriber<Void>() {
                        @Override
                        public void onSubscribe(org.reactivestreams.Subscription s) {
                            s.request(1);
                        }

                        @Override
                        public void onNext(Void v) {
                        }

                        @Override
                        public void onError(Throwable e) {
                            throw new IllegalStateException("the subscriber broke");
                        }

                        @Override
                        public void onComplete() {
                        }
                    });
            assertThat(counting.periodic).as("the poll of the status that does not push").hasSize(1);

            try {
                failing.push(StatusCode.ERR_RDMA_OP);
                time.advanceTimeBy(Duration.ZERO); // the end, handed to the scheduler unless direct
            } catch (IllegalStateException thrownBySubscriber) {
                // the subscriber's own failure may surface here; the wait must have cleaned up all the same
            }
            time.advanceTimeBy(Duration.ofMillis(2)); // a direct end's timers go within a millisecond at most

            assertThat(counting.periodic.getFirst().isDisposed()).as("direct " + direct + ": the poll").isTrue();
            assertThat(counting.delayed.getFirst().isDisposed()).as("direct " + direct + ": the deadline").isTrue();
        }
    }

    @Test
    void awaitAllWaitsForThePushesOfTheStatusesAPublisherEmits() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> Flux.just(a, b).as(PushWait.failFast(Duration.ofSeconds(30))::awaitAll))
                .expectSubscription()
                .then(() -> a.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> b.push(StatusCode.SUCCESS))
                .verifyComplete();
    }

    @Test
    void awaitAllOfAnEmptyPublisherCompletesAtOnceAndAnErrorPassesAsItIs() {
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).awaitAll(Flux.empty()))
                .expectSubscription()
                .verifyComplete();
        IllegalStateException planFailed = new IllegalStateException("no plan for layer 3");
        StepVerifier.withVirtualTime(() -> Flux.<PushedStatus>just(new Pushed()).concatWith(Mono.error(planFailed))
                        .as(PushWait.failFast(Duration.ofSeconds(30))::awaitAll))
                .expectSubscription()
                .expectErrorSatisfies(e -> assertThat(e).isSameAs(planFailed))
                .verify();
    }

    @Test
    void cancellingAwaitAllCancelsThePublisherOrThePushesAwaited() {
        TestPublisher<PushedStatus> statuses = TestPublisher.create();
        StepVerifier.withVirtualTime(() -> statuses.flux().as(PushWait.failFast(Duration.ofSeconds(30))::awaitAll))
                .expectSubscription()
                .then(() -> statuses.next(new Pushed()))
                .thenCancel()
                .verify();
        statuses.assertCancelled();

        Pushed awaited = new Pushed();
        StepVerifier.withVirtualTime(() -> Flux.just(awaited).as(PushWait.failFast(Duration.ofSeconds(30))::awaitAll))
                .expectSubscription()
                .then(() -> assertThat(awaited.sink.currentSubscriberCount()).isEqualTo(1))
                .thenCancel()
                .verify();
        assertThat(awaited.sink.currentSubscriberCount()).isZero();
    }

    @Test
    void statusesStillInFlightAtTheTimeoutFailWithMoriiosTimeoutMessage() {
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(3)).await(List.of(new Pushed())))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(2999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorMessage("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 3s")
                .verify();
    }

    @Test
    void aStatusThatDoesNotPushIsPolledAtTheSliceSet() {
        VirtualTimeScheduler time = VirtualTimeScheduler.getOrSet();
        try {
            ScriptedStatus polled = ScriptedStatus.succeedsAt(time, Duration.ofMillis(22));
            StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(3)).slice(Duration.ofMillis(4))
                            .await(List.of(polled)))
                    .expectSubscription()
                    .expectNoEvent(Duration.ofMillis(23))
                    .thenAwait(Duration.ofMillis(1))
                    .verifyComplete();
            assertThat(polled.queries()).isEqualTo(7);
        } finally {
            VirtualTimeScheduler.reset();
        }
    }

    @Test
    void aStatusThatDoesNotPushIsPolledEverySlice() {
        VirtualTimeScheduler time = VirtualTimeScheduler.getOrSet();
        try {
            ScriptedStatus polled = ScriptedStatus.succeedsAt(time, Duration.ofMillis(25));
            StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(3)).await(List.of(polled)))
                    .expectSubscription()
                    .expectNoEvent(Duration.ofMillis(29))
                    .thenAwait(Duration.ofMillis(1))
                    .verifyComplete();
        } finally {
            VirtualTimeScheduler.reset();
        }
    }

    @Test
    void aPushedCompletionArrivesOnTheWaitsSchedulerNotOnThePushingThread() throws Exception {
        Scheduler waitThreads = Schedulers.newSingle("push-wait-test");
        ExecutorService backend = Executors.newSingleThreadExecutor(r -> new Thread(r, "backend-notifier"));
        try {
            Pushed a = new Pushed();
            AtomicReference<String> completedOn = new AtomicReference<>();
            CountDownLatch completed = new CountDownLatch(1);
            PushWait.failFast(Duration.ofSeconds(30)).scheduler(waitThreads).await(List.of(a))
                    .subscribe(null, e -> completed.countDown(), () -> {
                        completedOn.set(Thread.currentThread().getName());
                        completed.countDown();
                    });
            backend.execute(() -> a.push(StatusCode.SUCCESS));
            assertThat(completed.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(completedOn.get()).startsWith("push-wait-test");
        } finally {
            backend.shutdownNow();
            waitThreads.dispose();
        }
    }

    @Test
    void aSubscribersWorkAfterOneWaitDoesNotHoldUpThePushOfAnother() throws Exception {
        Scheduler firstThreads = Schedulers.newSingle("push-wait-first");
        Scheduler secondThreads = Schedulers.newSingle("push-wait-second");
        ExecutorService backend = Executors.newSingleThreadExecutor(r -> new Thread(r, "backend-notifier"));
        try {
            Pushed first = new Pushed();
            Pushed second = new Pushed();
            CountDownLatch secondDone = new CountDownLatch(1);
            CountDownLatch firstSawSecond = new CountDownLatch(1);
            PushWait.failFast(Duration.ofSeconds(30)).scheduler(firstThreads).await(List.of(first))
                    .subscribe(null, null, () -> {
                        // Downstream work that can only finish once the other wait's push got through.
                        try {
                            if (secondDone.await(5, TimeUnit.SECONDS)) {
                                firstSawSecond.countDown();
                            }
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    });
            PushWait.failFast(Duration.ofSeconds(30)).scheduler(secondThreads).await(List.of(second))
                    .subscribe(null, null, secondDone::countDown);
            backend.execute(() -> first.push(StatusCode.SUCCESS));
            backend.execute(() -> second.push(StatusCode.SUCCESS));
            assertThat(firstSawSecond.await(5, TimeUnit.SECONDS)).isTrue();
        } finally {
            backend.shutdownNow();
            firstThreads.dispose();
            secondThreads.dispose();
        }
    }

    @Test
    void aStalledFailFastPushWaitErrorsStallAfterTheLastStatusSettledNotAtTheTimeout() {
        Pushed a = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).stallAfter(Duration.ofSeconds(1))
                        .await(List.of(a, new Pushed(), new Pushed())))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(300))
                .then(() -> a.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofMillis(999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOfSatisfying(TransferException.class, t -> {
                        assertThat(t.kind()).isEqualTo(TransferException.Kind.STALLED);
                        assertThat(t.code()).isEqualTo(StatusCode.IN_PROGRESS);
                    });
                    assertThat(e).hasMessage("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer"
                            + " stalled: no status completed for 1s, 2 of 3 statuses still in flight");
                })
                .verify();
    }

    @Test
    void aStalledDrainPushWaitWithNoFailureErrorsAsStalled() {
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).stallAfter(Duration.ofSeconds(2))
                        .await(List.of(new Pushed())))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(1999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).kind())
                        .isEqualTo(TransferException.Kind.STALLED))
                .verify();
    }

    @Test
    void aStalledDrainPushWaitReportsTheFailureItAlreadySawAtTheStallTime() {
        Pushed failing = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).stallAfter(Duration.ofSeconds(1))
                        .await(List.of(new Pushed(), failing)))
                .expectSubscription()
                .thenAwait(Duration.ofMillis(200))
                .then(() -> failing.push(StatusCode.ERR_RDMA_OP))
                .expectNoEvent(Duration.ofMillis(999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> {
                    assertThat(((TransferException) e).kind()).isEqualTo(TransferException.Kind.FAILED);
                    assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_RDMA_OP);
                })
                .verify();
    }

    @Test
    void aPushWaitWhoseStatusesKeepSettlingSlowlyIsNotAStall() {
        List<Pushed> statuses = java.util.stream.IntStream.range(0, 10).mapToObj(i -> new Pushed()).toList();
        StepVerifier.Step<Void> step = StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30))
                        .stallAfter(Duration.ofSeconds(1)).await(statuses))
                .expectSubscription();
        for (Pushed status : statuses) {
            step = step.expectNoEvent(Duration.ofMillis(900)).then(() -> status.push(StatusCode.SUCCESS));
        }
        step.verifyComplete();
    }

    @Test
    void aStatusSeenSettledByThePollCountsAsProgress() {
        VirtualTimeScheduler time = VirtualTimeScheduler.getOrSet();
        try {
            ScriptedStatus polled = ScriptedStatus.succeedsAt(time, Duration.ofMillis(900));
            Pushed pushed = new Pushed();
            StepVerifier.withVirtualTime(() -> PushWait.failFast(Duration.ofSeconds(30)).stallAfter(Duration.ofSeconds(1))
                            .await(List.of(polled, pushed)))
                    .expectSubscription()
                    .expectNoEvent(Duration.ofMillis(1500))
                    .then(() -> pushed.push(StatusCode.SUCCESS))
                    .verifyComplete();
        } finally {
            VirtualTimeScheduler.reset();
        }
    }

    @Test
    void withoutStallAfterAnIdlePushWaitRunsToTheTransferTimeout() {
        StepVerifier.withVirtualTime(() -> PushWait.drain(Duration.ofSeconds(30)).await(List.of(new Pushed())))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(29_999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).kind())
                        .isEqualTo(TransferException.Kind.TIMED_OUT))
                .verify();
    }

    @Test
    void stallAfterMustLieBetweenTheSliceAndTheTransferTimeout() {
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30));
        assertThatThrownBy(() -> wait.stallAfter(Duration.ofMillis(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("between the slice");
        assertThatThrownBy(() -> wait.stallAfter(Duration.ofMinutes(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("transfer timeout");
        assertThatThrownBy(() -> wait.stallAfter(null))
                .isInstanceOf(NullPointerException.class);
    }
}
