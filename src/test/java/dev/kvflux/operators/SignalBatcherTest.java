package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.ListenedStatus;
import dev.kvflux.testing.RecordingScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The push wait's hand-over to the scheduler: the waits that pushes end together share one task. */
class SignalBatcherTest {

    private static List<ListenedStatus> statuses(int count) {
        List<ListenedStatus> statuses = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            statuses.add(new ListenedStatus());
        }
        return statuses;
    }

    /** Three waits on one wait, each of two statuses, each noting its name in {@code ended} when it completes. */
    private static List<List<ListenedStatus>> threeWaits(PushWait wait, List<String> ended) {
        List<List<ListenedStatus>> waits = new ArrayList<>();
        for (int w = 0; w < 3; w++) {
            List<ListenedStatus> mine = statuses(2);
            String name = "wait " + w;
            wait.await(mine).subscribe(null, e -> ended.add(name + " failed"), () -> ended.add(name));
            waits.add(mine);
        }
        return waits;
    }

    @Test
    void waitsThatPushesEndBeforeTheSchedulerRunsShareOneTaskAndAreSignalledInTheOrderTheyEnded() {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on), ended);

        waits.get(2).forEach(ListenedStatus::push);
        waits.get(0).forEach(ListenedStatus::push);
        waits.get(1).forEach(ListenedStatus::push);

        assertThat(ended).as("nothing signalled on the pushing thread").isEmpty();
        assertThat(on.immediate.get()).as("one task for the three").isEqualTo(1);
        on.runHeld();
        assertThat(ended).containsExactly("wait 2", "wait 0", "wait 1");
    }

    @Test
    void aWaitEndedAfterItsBatchRanAsksForATaskOfItsOwn() {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on), ended);

        waits.get(0).forEach(ListenedStatus::push);
        on.runHeld();
        waits.get(1).forEach(ListenedStatus::push);
        waits.get(2).getFirst().push(StatusCode.ERR_GPU_OP);

        assertThat(ended).containsExactly("wait 0");
        assertThat(on.immediate.get()).isEqualTo(2);
        on.runHeld();
        assertThat(ended).containsExactly("wait 0", "wait 1", "wait 2 failed");
    }

    /** A raw subscriber whose completion throws {@code thrown}: Reactor's lambda subscribers catch what they throw. */
    private static reactor.core.CoreSubscriber<Void> throwingOnComplete(Throwable thrown) {
        return new reactor.core.CoreSubscriber<>() {
            @Override
            public void onSubscribe(org.reactivestreams.Subscription s) {
                s.request(1);
            }

            @Override
            public void onNext(Void v) {
            }

            @Override
            public void onError(Throwable e) {
            }

            @Override
            public void onComplete() {
                if (thrown instanceof RuntimeException e) {
                    throw e;
                }
                throw (Error) thrown;
            }
        };
    }

    @Test
    void subscribersThatThrowDoNotKeepTheRestOfTheirBatchFromTheirSignalsAndTheFirstThrowableIsReported()
            throws Exception {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        PushWait wait = PushWait.failFast(Duration.ofSeconds(30)).scheduler(on);
        List<ListenedStatus> first = statuses(1);
        List<ListenedStatus> second = statuses(1);
        List<ListenedStatus> third = statuses(1);
        List<String> ended = new CopyOnWriteArrayList<>();
        AssertionError error = new AssertionError("the subscriber's own assertion");
        IllegalStateException bug = new IllegalStateException("the subscriber's own bug");
        wait.await(first).subscribe(throwingOnComplete(error));
        wait.await(second).subscribe(throwingOnComplete(bug));
        wait.await(third).subscribe(null, null, () -> ended.add("third"));
        first.getFirst().push();
        second.getFirst().push();
        third.getFirst().push();

        List<Throwable> reported = new CopyOnWriteArrayList<>();
        Thread runner = new Thread(on::runHeld, "a-scheduler-thread");
        runner.setUncaughtExceptionHandler((thread, e) -> reported.add(e));
        runner.start();
        runner.join();

        assertThat(ended).containsExactly("third");
        assertThat(reported).singleElement().isSameAs(error);
        assertThat(error.getSuppressed()).containsExactly(bug);
    }

    @Test
    void aBatchWhoseTaskTheSchedulerDroppedIsSignalledByTheNextWaitHandedOverOnceItIsOld() {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        java.util.concurrent.atomic.AtomicLong clock = new java.util.concurrent.atomic.AtomicLong();
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on)
                .reaperClock(clock::get), ended);

        waits.get(0).forEach(ListenedStatus::push);
        on.held.clear(); // the scheduler drops the batch's task, as one shut down with tasks pending does
        clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(SignalBatcher.STUCK_MILLIS));
        waits.get(1).forEach(ListenedStatus::push);
        assertThat(ended).as("a batch exactly as old as the bound still waits for its task").isEmpty();
        clock.addAndGet(1);
        waits.get(2).forEach(ListenedStatus::push);

        assertThat(ended).containsExactly("wait 0", "wait 1", "wait 2");
        assertThat(on.immediate.get()).as("no task asked for the batch that joined the dropped one").isEqualTo(1);
    }

    @Test
    void aWaitHandedOverToABatchWhoseSchedulerIsShutDownSignalsItAtOnceOnThePushingThread() {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on), ended);

        waits.get(0).forEach(ListenedStatus::push);
        on.held.clear();
        on.disposed = true; // shut down with the batch's task pending
        waits.get(1).forEach(ListenedStatus::push);

        assertThat(ended).containsExactly("wait 0", "wait 1");
        assertThat(on.immediate.get()).isEqualTo(1);
    }

    @Test
    void whenTheSchedulerRefusesTheTaskTheWaitIsSignalledOnThePushingThread() {
        RecordingScheduler on = RecordingScheduler.holding(VirtualTimeScheduler.create());
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on), ended);
        on.refusing = true;

        waits.get(1).forEach(ListenedStatus::push);

        assertThat(ended).containsExactly("wait 1");
        assertThat(on.held).isEmpty();
    }

    @Test
    void theDeadlinesOfABatchsWaitsAreDisposedOnceItHasRun() {
        VirtualTimeScheduler time = VirtualTimeScheduler.create();
        RecordingScheduler on = RecordingScheduler.holding(time);
        List<String> ended = new CopyOnWriteArrayList<>();
        List<List<ListenedStatus>> waits = threeWaits(PushWait.failFast(Duration.ofSeconds(30)).scheduler(on), ended);
        assertThat(on.delayed).as("a deadline per wait").hasSize(3).noneMatch(Disposable::isDisposed);

        waits.forEach(w -> w.forEach(ListenedStatus::push));
        on.runHeld();
        time.advanceTimeBy(Duration.ofMillis(2));

        assertThat(ended).hasSize(3);
        assertThat(on.delayed.subList(0, 3)).allMatch(Disposable::isDisposed);
    }
}
