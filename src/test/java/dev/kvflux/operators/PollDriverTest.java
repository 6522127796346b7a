package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The shared poll driver: one periodic task per shard however many requests wait, none once they end. */
class PollDriverTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** A virtual-time scheduler that counts the periodic tasks started on it. */
    private static final class CountingPeriodic implements Scheduler {
        final VirtualTimeScheduler time = VirtualTimeScheduler.create();
        final AtomicInteger periodic = new AtomicInteger();

        @Override
        public Disposable schedule(Runnable task) {
            return time.schedule(task);
        }

        @Override
        public Disposable schedule(Runnable task, long delay, TimeUnit unit) {
            return time.schedule(task, delay, unit);
        }

        @Override
        public Disposable schedulePeriodically(Runnable task, long initialDelay, long period, TimeUnit unit) {
            periodic.incrementAndGet();
            return time.schedulePeriodically(task, initialDelay, period, unit);
        }

        @Override
        public long now(TimeUnit unit) {
            return time.now(unit);
        }

        @Override
        public Worker createWorker() {
            return time.createWorker();
        }
    }

    @Test
    void aThousandWaitingRequestsShareOnePeriodicTaskPerShardAndAllComplete() {
        CountingPeriodic scheduler = new CountingPeriodic();
        CompletionWait wait = CompletionWait.failFast(TIMEOUT).sharedPoll().scheduler(scheduler);
        AtomicInteger completed = new AtomicInteger();
        for (int i = 0; i < 1000; i++) {
            List<TransferStatus> statuses = List.of(
                    ScriptedStatus.succeedsAt(scheduler.time, Duration.ofMillis(5 + i % 300)),
                    ScriptedStatus.succeedsAt(scheduler.time, Duration.ofMillis(17)));
            wait.await(statuses).subscribe(null, null, completed::incrementAndGet);
        }
        scheduler.time.advanceTimeBy(Duration.ofMillis(310));
        assertThat(completed).hasValue(1000);
        assertThat(scheduler.periodic.get()).isLessThanOrEqualTo(Schedulers.DEFAULT_POOL_SIZE);
        assertThat(PollDriver.of(scheduler, wait.slice().toNanos()).registered()).isZero();
    }

    @Test
    void aCancelledRequestIsDroppedAtTheNextTickAndNeverQueriedAgain() {
        CountingPeriodic scheduler = new CountingPeriodic();
        CompletionWait wait = CompletionWait.failFast(TIMEOUT).sharedPoll().scheduler(scheduler);
        List<ScriptedStatus> statuses = new ArrayList<>();
        statuses.add(ScriptedStatus.never(scheduler.time));
        Disposable subscription = wait.await(statuses).subscribe();
        scheduler.time.advanceTimeBy(Duration.ofMillis(30));
        int queries = statuses.getFirst().queries();
        subscription.dispose();
        scheduler.time.advanceTimeBy(Duration.ofMillis(100));
        assertThat(statuses.getFirst().queries()).isEqualTo(queries);
        assertThat(PollDriver.of(scheduler, wait.slice().toNanos()).registered()).isZero();
    }
}
