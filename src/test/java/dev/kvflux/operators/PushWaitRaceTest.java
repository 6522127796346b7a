package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * A push wait's subscription (its listeners, then its look at the newest statuses still in flight) racing the
 * backend's pushes on another thread: whatever the interleaving, every wait ends once, with the outcome its statuses
 * call for. Asserts outcomes, not times.
 */
class PushWaitRaceTest {

    /**
     * A status as the engines' are: settling writes the code, then reads the listener; taking a listener writes it,
     * then reads the code (both volatile), so a listener is told once or twice, never missed. Its copies may end before
     * its push: a query then finds it done. It may say its code once pushed ({@link #settledCode}), as the engines'
     * statuses do.
     */
    private static final class RacingStatus implements PushedStatus {
        private volatile StatusCode code = StatusCode.IN_PROGRESS;
        private volatile boolean copiesEnded;
        private volatile Consumer<StatusCode> listener;
        private final boolean says;

        RacingStatus(boolean says) {
            this.says = says;
        }

        /** The copies ended: a query sees it from now on, the push comes later. */
        void endCopies() {
            copiesEnded = true;
        }

        void push(StatusCode terminal) {
            code = terminal;
            Consumer<StatusCode> l = listener;
            if (l != null) {
                l.accept(terminal);
            }
        }

        @Override
        public StatusCode code() {
            StatusCode now = code;
            return now == StatusCode.IN_PROGRESS && copiesEnded ? StatusCode.SUCCESS : now;
        }

        @Override
        public String message() {
            return code.isFailure() ? "copy failed" : "";
        }

        @Override
        public StatusCode settledCode() {
            StatusCode now = code;
            return says && now.isTerminal() ? now : null;
        }

        @Override
        public boolean onPushed(Consumer<StatusCode> l) {
            listener = l;
            StatusCode now = code;
            if (now.isTerminal()) {
                l.accept(now);
            }
            return true;
        }

        @Override
        public Mono<StatusCode> pushed() {
            return Mono.error(new AssertionError("the wait subscribed to pushed() although a listener was taken"));
        }
    }

    /** Counts each wait's reported ends, failures, and the statuses it reported in flight. */
    private static final class Ends implements WaitRecorder {
        final AtomicInteger ends = new AtomicInteger();
        final AtomicInteger failures = new AtomicInteger();
        final AtomicInteger inFlight = new AtomicInteger();
        final AtomicReference<WaitOutcome> outcome = new AtomicReference<>();

        @Override
        public void recordStatusesInFlight(String strategy, int change) {
            inFlight.addAndGet(change);
        }

        @Override
        public void recordStatusFailed(String strategy, StatusCode code) {
            failures.incrementAndGet();
        }

        @Override
        public void recordWaitEnded(String strategy, WaitOutcome how, long durationNanos) {
            ends.incrementAndGet();
            outcome.set(how);
        }
    }

    @Test
    void everyWaitEndsOnceWithItsStatusesOutcomeWhenPushesRaceItsSubscription() throws Exception {
        Random random = new Random(20261206);
        ExecutorService backend = Executors.newSingleThreadExecutor(r -> new Thread(r, "backend-push"));
        try {
            for (int round = 0; round < 3_000; round++) {
                boolean failFast = round % 2 == 0;
                boolean direct = round % 3 == 0;
                boolean say = round % 5 < 3;
                int n = 1 + random.nextInt(24);
                int failing = random.nextInt(6) == 0 ? random.nextInt(n) : -1;
                List<RacingStatus> statuses = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    statuses.add(new RacingStatus(say && random.nextInt(4) != 0));
                }
                // some settle before the wait, some have their copies ended unpushed, the rest push during it
                int[] order = random.ints(0, n).distinct().limit(n).toArray();
                int before = random.nextInt(n + 1);
                for (int k = 0; k < before; k++) {
                    RacingStatus s = statuses.get(order[k]);
                    if (random.nextBoolean() || order[k] == failing) {
                        s.push(order[k] == failing ? StatusCode.ERR_GPU_OP : StatusCode.SUCCESS);
                    } else {
                        s.endCopies();
                    }
                }
                CountDownLatch go = new CountDownLatch(1);
                Future<?> pushes = backend.submit(() -> {
                    go.await();
                    for (int k = 0; k < n; k++) {
                        RacingStatus s = statuses.get(order[k]);
                        if (!s.code.isTerminal()) {
                            s.push(order[k] == failing ? StatusCode.ERR_GPU_OP : StatusCode.SUCCESS);
                        }
                    }
                    return null;
                });
                Ends ends = new Ends();
                PushWait wait = (failFast ? PushWait.failFast(Duration.ofSeconds(30)) : PushWait.drain(Duration.ofSeconds(30)))
                        .recorder(ends);
                if (direct) {
                    wait = wait.signalOnPush();
                }
                AtomicInteger signals = new AtomicInteger();
                AtomicReference<Throwable> error = new AtomicReference<>();
                CountDownLatch ended = new CountDownLatch(1);
                go.countDown();
                wait.await(statuses).subscribe(null, e -> {
                    error.set(e);
                    signals.incrementAndGet();
                    ended.countDown();
                }, () -> {
                    signals.incrementAndGet();
                    ended.countDown();
                });
                pushes.get(); // every wait below is bounded by the suite's per-test timeout, not by a clock here

                String what = "round " + round + " (" + n + " statuses, " + (failFast ? "fail-fast" : "drain")
                        + (direct ? ", signal on push" : "") + (say ? ", most say their code" : "") + ", failing " + failing + ", " + before + " before)";
                ended.await();
                assertThat(signals.get()).as(what + ": signals").isEqualTo(1);
                assertThat(ends.ends.get()).as(what + ": reported ends").isEqualTo(1);
                assertThat(ends.inFlight.get()).as(what + ": statuses reported in flight after the end").isZero();
                assertThat(ends.failures.get()).as(what + ": failures reported").isEqualTo(failing < 0 ? 0 : 1);
                if (failing < 0) {
                    assertThat(error.get()).as(what).isNull();
                    assertThat(ends.outcome.get()).as(what).isEqualTo(WaitOutcome.DONE);
                } else {
                    assertThat(error.get()).as(what).isInstanceOf(TransferException.class);
                    assertThat(((TransferException) error.get()).code()).as(what).isEqualTo(StatusCode.ERR_GPU_OP);
                    assertThat(ends.outcome.get()).as(what).isEqualTo(WaitOutcome.FAILED);
                }
            }
        } finally {
            backend.shutdownNow();
        }
    }
}
