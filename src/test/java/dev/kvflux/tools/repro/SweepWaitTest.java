package dev.kvflux.tools.repro;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.testing.Blocking;
import dev.kvflux.testing.RecordingWaitRecorder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * poll-1ms, vLLM's wait as kvflux measures it: one thread sweeps every status of every request. The claims are
 * about order and counts (queries, sweeps), never about how fast a loaded machine sweeps.
 */
class SweepWaitTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    /** A status the test settles by hand; it counts its queries and keeps the threads that made them. */
    private static class HandStatus implements TransferStatus {
        final AtomicInteger queries = new AtomicInteger();
        final Set<Thread> queriedBy = ConcurrentHashMap.newKeySet();
        private volatile StatusCode code = StatusCode.IN_PROGRESS;
        private volatile String message = "";

        @Override
        public StatusCode code() {
            queries.incrementAndGet();
            queriedBy.add(Thread.currentThread());
            return code;
        }

        @Override
        public String message() {
            return message;
        }

        HandStatus settle(StatusCode code, String message) {
            this.message = message;
            this.code = code;
            return this;
        }

        HandStatus succeed() {
            return settle(StatusCode.SUCCESS, "");
        }
    }

    /** How a subscription ended, once it has. */
    private static CompletableFuture<Void> subscribe(SweepWait wait, List<? extends TransferStatus> statuses) {
        CompletableFuture<Void> ended = new CompletableFuture<>();
        wait.await(statuses).subscribe(null, ended::completeExceptionally, () -> ended.complete(null));
        return ended;
    }

    private static Throwable errorOf(CompletableFuture<Void> ended) throws Exception {
        try {
            ended.get(10, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("the wait completed; an error was expected");
    }

    /** Waits until the shared sweeper has swept {@code sweeps} more times than now. */
    private static void awaitSweeps(int sweeps) {
        long target = StatusSweeper.shared().sweeps() + sweeps;
        Blocking.awaitTrue(() -> StatusSweeper.shared().sweeps() >= target);
    }

    @Test
    void completesOnlyOnceEveryStatusIsDoneAndStopsQueryingTheDoneOnes() throws Exception {
        HandStatus early = new HandStatus();
        HandStatus late = new HandStatus();
        CompletableFuture<Void> ended = subscribe(SweepWait.of(FailMode.FAIL_FAST, TIMEOUT), List.of(early, late));
        Blocking.awaitTrue(() -> late.queries.get() >= 3);

        early.succeed();
        awaitSweeps(3);
        int earlyQueries = early.queries.get();
        awaitSweeps(3);
        assertThat(ended).as("one status is still in flight").isNotDone();
        assertThat(early.queries.get()).as("a done status is not queried again").isEqualTo(earlyQueries);

        late.succeed();
        ended.get(10, TimeUnit.SECONDS);
    }

    @Test
    void failFastErrorsWithTheFailedStatusCodeAndMessageWhileOthersAreStillInFlight() throws Exception {
        HandStatus running = new HandStatus();
        HandStatus failing = new HandStatus();
        CompletableFuture<Void> ended = subscribe(SweepWait.of(FailMode.FAIL_FAST, TIMEOUT), List.of(running, failing));
        Blocking.awaitTrue(() -> failing.queries.get() >= 2);

        failing.settle(StatusCode.ERR_GPU_OP, "copy died");

        assertThat(errorOf(ended)).isInstanceOfSatisfying(TransferException.class, t -> {
            assertThat(t.kind()).isEqualTo(TransferException.Kind.FAILED);
            assertThat(t.code()).isEqualTo(StatusCode.ERR_GPU_OP);
            assertThat(t).hasMessage("MoRIIO batch wait failed (StatusCode.ERR_GPU_OP): copy died");
        });
        assertThat(running.code).isEqualTo(StatusCode.IN_PROGRESS);
    }

    @Test
    void drainErrorsOnlyOnceNothingIsInFlight() throws Exception {
        HandStatus failing = new HandStatus().settle(StatusCode.ERR_RDMA_OP, "nic");
        HandStatus running = new HandStatus();
        CompletableFuture<Void> ended = subscribe(SweepWait.of(FailMode.DRAIN, TIMEOUT), List.of(failing, running));
        Blocking.awaitTrue(() -> failing.queries.get() >= 1 && running.queries.get() >= 4);
        awaitSweeps(3);
        assertThat(ended).as("a status is still in flight").isNotDone();

        running.succeed();

        assertThat(errorOf(ended)).isInstanceOfSatisfying(TransferException.class, t -> {
            assertThat(t.code()).isEqualTo(StatusCode.ERR_RDMA_OP);
            assertThat(t.reason()).isEqualTo("nic");
        });
        assertThat(failing.queries.get()).as("a failed status has left flight").isEqualTo(1);
    }

    @Test
    void timesOutAtTheTransferTimeoutWithMoriiosMessageAfterSweepingAllAlong() throws Exception {
        HandStatus never = new HandStatus();
        Duration timeout = Duration.ofMillis(300);
        long subscribed = System.nanoTime();
        CompletableFuture<Void> ended = subscribe(SweepWait.of(FailMode.FAIL_FAST, timeout), List.of(never));

        Throwable error = errorOf(ended);
        long took = System.nanoTime() - subscribed;

        assertThat(error).isInstanceOfSatisfying(TransferException.class, t -> {
            assertThat(t.kind()).isEqualTo(TransferException.Kind.TIMED_OUT);
            assertThat(t).hasMessage(
                    "MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 0.3s");
        });
        assertThat(Duration.ofNanos(took)).as("not before the timeout, and within seconds of it")
                .isGreaterThanOrEqualTo(timeout).isLessThan(timeout.plusSeconds(5));
        assertThat(never.queries.get()).as("queried at every sweep until the deadline").isGreaterThan(1);
    }

    @Test
    void cancellingDropsTheRequestFromTheSweepWhileTheSweepGoesOn() {
        HandStatus cancelled = new HandStatus();
        HandStatus other = new HandStatus();
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        SweepWait wait = SweepWait.of(FailMode.FAIL_FAST, TIMEOUT);
        Disposable goes = wait.recorder(recorder).await(List.of(cancelled)).subscribe();
        Disposable stays = wait.await(List.of(other)).subscribe();
        Blocking.awaitTrue(() -> cancelled.queries.get() >= 3);

        goes.dispose();
        awaitSweeps(2);
        int atDrop = cancelled.queries.get();
        int otherAtDrop = other.queries.get();
        awaitSweeps(10);
        stays.dispose();

        assertThat(cancelled.queries.get()).as("no query after the sweep that dropped it").isEqualTo(atDrop);
        assertThat(other.queries.get()).as("the other request is still swept").isGreaterThanOrEqualTo(otherAtDrop + 10);
        assertThat(recorder.ended).singleElement()
                .satisfies(e -> assertThat(e.outcome()).isEqualTo(WaitOutcome.CANCELLED));
    }

    @Test
    void oneDaemonThreadQueriesEveryStatusOfEveryRequestRegisteredFromManyThreads() throws Exception {
        List<HandStatus> all = new ArrayList<>();
        List<CompletableFuture<Void>> ends = new ArrayList<>();
        List<Thread> registering = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            SweepWait wait = SweepWait.of(t % 2 == 0 ? FailMode.FAIL_FAST : FailMode.DRAIN, TIMEOUT);
            List<List<HandStatus>> requests = new ArrayList<>();
            for (int r = 0; r < 50; r++) {
                List<HandStatus> statuses = List.of(new HandStatus(), new HandStatus(), new HandStatus());
                all.addAll(statuses);
                requests.add(statuses);
                ends.add(new CompletableFuture<>());
            }
            int first = ends.size() - requests.size();
            registering.add(Thread.ofPlatform().start(() -> {
                for (int r = 0; r < requests.size(); r++) {
                    CompletableFuture<Void> end = ends.get(first + r);
                    wait.await(requests.get(r)).subscribe(null, end::completeExceptionally, () -> end.complete(null));
                }
            }));
        }
        for (Thread thread : registering) {
            thread.join();
        }
        Blocking.awaitTrue(() -> all.stream().allMatch(s -> s.queries.get() >= 2));

        all.forEach(HandStatus::succeed);

        CompletableFuture.allOf(ends.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
        Set<Thread> queriedBy = ConcurrentHashMap.newKeySet();
        all.forEach(s -> queriedBy.addAll(s.queriedBy));
        assertThat(queriedBy).singleElement().satisfies(thread -> {
            assertThat(thread.getName()).isEqualTo(StatusSweeper.THREAD_NAME);
            assertThat(thread.isDaemon()).isTrue();
        });
    }

    @Test
    void theRecorderHearsEverySweepsQueriesAndTheEndInOrder() throws Exception {
        HandStatus done = new HandStatus().succeed();
        HandStatus later = new HandStatus();
        RecordingWaitRecorder recorder = new RecordingWaitRecorder();
        CompletableFuture<Void> ended = subscribe(SweepWait.of(FailMode.FAIL_FAST, TIMEOUT).recorder(recorder),
                List.of(done, later));
        Blocking.awaitTrue(() -> later.queries.get() >= 3);
        later.succeed();
        ended.get(10, TimeUnit.SECONDS);

        assertThat(recorder.started).containsExactly(SweepWait.NAME);
        assertThat(recorder.polls).singleElement().satisfies(p -> {
            assertThat(p.strategy()).isEqualTo(SweepWait.NAME);
            assertThat(p.polls()).isEqualTo(later.queries.get());
            assertThat(p.queries()).isEqualTo(done.queries.get() + later.queries.get());
        });
        assertThat(recorder.inFlightChanges.stream().mapToInt(Integer::intValue).sum()).isZero();
        assertThat(recorder.ended).singleElement().satisfies(e -> assertThat(e.outcome()).isEqualTo(WaitOutcome.DONE));
        assertThat(recorder.order.getFirst()).isEqualTo("started");
        assertThat(recorder.order.getLast()).isEqualTo("ended");
    }

    @Test
    void anEmptyListCompletesAtOnceAndABrokenStatusEndsTheWaitWithErrBadState() throws Exception {
        SweepWait wait = SweepWait.of(FailMode.DRAIN, TIMEOUT);
        assertThat(wait.await(List.of()).block(Duration.ofSeconds(10))).isNull();

        List<TransferStatus> withNull = new ArrayList<>();
        withNull.add(new HandStatus());
        withNull.add(null);
        assertThat(errorOf(subscribe(wait, withNull))).isInstanceOfSatisfying(TransferException.class, t -> {
            assertThat(t.code()).isEqualTo(StatusCode.ERR_BAD_STATE);
            assertThat(t.reason()).isEqualTo("status 1 of 2 is null");
        });

        IllegalStateException thrown = new IllegalStateException("handle freed");
        TransferStatus throwing = new HandStatus() {
            @Override
            public StatusCode code() {
                throw thrown;
            }
        };
        assertThat(errorOf(subscribe(wait, List.of(new HandStatus(), throwing))))
                .isInstanceOfSatisfying(TransferException.class, t -> {
                    assertThat(t.code()).isEqualTo(StatusCode.ERR_BAD_STATE);
                    assertThat(t).hasCause(thrown);
                });
    }
}
