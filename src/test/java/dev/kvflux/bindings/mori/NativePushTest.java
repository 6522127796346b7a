package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.testing.NoLiveSimHandles;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;

/**
 * Push completion on the native simulator, through FFM: the library completes each status of an engine that
 * pushes at its copies' end and hands it to the notification thread, so that {@link PushWait} ends without
 * polling; an engine that does not push keeps MoRI's model.
 */
@ExtendWith(NoLiveSimHandles.class)
class NativePushTest {
    private static final long BLOCK = 4096;
    private static final Duration PER_BATCH = Duration.ofMillis(20);
    private static final int BATCHES = 8;

    private static List<MoriStatus> post(SimPair pair, int batches) {
        pair.sim.setTiming(pair.p.engine(), PER_BATCH, Long.MAX_VALUE);
        List<MoriStatus> statuses = new ArrayList<>();
        for (int i = 0; i < batches; i++) {
            BatchPlan plan = BatchPlan.mirrored(new long[] {i * BLOCK}, BLOCK);
            statuses.add((MoriStatus) pair.session.batchWrite(plan, pair.session.allocateTransferUid()));
        }
        return statuses;
    }

    @Test
    void anEngineThatPushesPostsPushedStatusesEachEmittedOnceAtItsCopiesEnd() {
        try (SimPair pair = new SimPair("push-order", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> statuses = post(pair, BATCHES);
            Map<MoriStatus, Long> emittedAt = new ConcurrentHashMap<>();
            Map<MoriStatus, String> emittedOn = new ConcurrentHashMap<>();

            List<StatusCode> codes = Flux.fromIterable(statuses)
                    .flatMap(s -> ((PushedStatus) s).pushed().doOnNext(c -> {
                        emittedAt.put(s, pair.sim.nowNanos());
                        emittedOn.put(s, Thread.currentThread().getName());
                    }))
                    .collectList().block(Duration.ofSeconds(5));

            assertThat(statuses).allMatch(s -> s instanceof PushedMoriStatus);
            assertThat(codes).hasSize(BATCHES).containsOnly(StatusCode.SUCCESS);
            assertThat(statuses).as("pushed: each says its code without a query")
                    .allMatch(s -> ((PushedStatus) s).settledCode() == StatusCode.SUCCESS);
            for (MoriStatus s : statuses) {
                long finish = pair.sim.finishNanos(s);
                assertThat(emittedAt.get(s)).as("pushed no earlier than its copies ended").isGreaterThanOrEqualTo(finish);
                assertThat(s.completedAtNanos()).isEqualTo(finish);
            }
            assertThat(emittedOn.values()).as("pushes that came after the subscription").contains("kvflux-mori-push");
            statuses.forEach(MoriStatus::close);
            assertThat(MoriIo.simulator().statusesAwaitingPush()).isZero();
        }
    }

    @Test
    void eachPushedStatusKnowsItsStagesInTheOrderThePushPassedThem() {
        try (SimPair pair = new SimPair("push-stages", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> statuses = post(pair, BATCHES);
            PushWait.failFast(Duration.ofSeconds(5)).await(statuses).block();

            int byPush = 0;
            for (MoriStatus s : statuses) {
                PushTimeline t = ((PushedStatus) s).timeline();
                if (t.equals(PushTimeline.NONE)) {
                    continue; // settled by the query at registration: it ended before anyone waited
                }
                byPush++;
                long[] times = t.times();
                assertThat(times).as("every stage of a push on the simulator is known")
                        .doesNotContain(TransferStatus.UNKNOWN_TIME);
                assertThat(times).as("stages in order: %s", t).isSorted();
                assertThat(t.callbackRan()).isEqualTo(s.completedAtNanos());
            }
            assertThat(byPush).as("batches of 20 ms each, posted at once: the later ones end after registering")
                    .isGreaterThan(0);
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void aStatusOfAnEngineThatOnlyTimesHasNoPushStages() {
        try (SimPair pair = new SimPair("push-times-stages", BLOCK)) {
            pair.p.engine().push(PushMode.TIMES);
            List<MoriStatus> statuses = post(pair, 1);
            dev.kvflux.operators.CompletionWait.failFast(Duration.ofSeconds(5)).await(statuses).block();

            assertThat(statuses.getFirst()).isNotInstanceOf(PushedStatus.class);
            assertThat(((TransferStatus) statuses.getFirst()).completedAtNanos())
                    .isNotEqualTo(TransferStatus.UNKNOWN_TIME);
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void pushWaitEndsAfterTheLastCopyWithEveryByteThere() {
        try (SimPair pair = new SimPair("push-wait", BATCHES * BLOCK)) {
            pair.p.buffer(pair.pRegion).fill((byte) 7);
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> statuses = post(pair, BATCHES);

            PushWait.failFast(Duration.ofSeconds(5)).await(statuses).block();
            long endedAt = pair.sim.nowNanos();

            assertThat(endedAt).isGreaterThanOrEqualTo(pair.sim.finishNanos(statuses.getLast()));
            assertThat(pair.d.buffer(pair.dRegion).asSlice(0, BATCHES * BLOCK)
                    .mismatch(pair.p.buffer(pair.pRegion).asSlice(0, BATCHES * BLOCK))).isEqualTo(-1);
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void twoPushWaitsOverOneTransfersStatusesAtOnceBothEndAtItsPushes() {
        // as decode's READ barriers do: one wait per layer, and one for the whole transfer's timeout
        try (SimPair pair = new SimPair("push-two-waits", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> statuses = post(pair, BATCHES);
            PushWait wait = PushWait.drain(Duration.ofSeconds(30));

            List<String> ended = Flux.merge(wait.await(statuses).thenReturn("all"),
                    wait.await(List.of(statuses.getLast())).thenReturn("last"))
                    .collectList().block(Duration.ofSeconds(20)); // a wait that missed its push would end at 30 s

            assertThat(ended).containsExactlyInAnyOrder("all", "last");
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void anInjectedFailureIsPushedWithItsCodeAndMessage() {
        try (SimPair pair = new SimPair("push-fail", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            pair.sim.failNth(pair.p.engine(), 3, StatusCode.ERR_RDMA_OP, "injected");
            List<MoriStatus> statuses = post(pair, BATCHES);

            TransferException error = catchThrowableOfType(TransferException.class,
                    () -> PushWait.failFast(Duration.ofSeconds(5)).await(statuses).block());
            long erroredAt = pair.sim.nowNanos();

            assertThat(error.code()).isEqualTo(StatusCode.ERR_RDMA_OP);
            assertThat(error.reason()).isEqualTo("injected");
            assertThat(((PushedStatus) statuses.get(2)).settledCode()).isEqualTo(StatusCode.ERR_RDMA_OP);
            assertThat(erroredAt).isGreaterThanOrEqualTo(pair.sim.finishNanos(statuses.get(2)))
                    .isLessThan(pair.sim.finishNanos(statuses.getLast()));
            assertThat(statuses.get(2).completedAtNanos()).isEqualTo(TransferStatus.UNKNOWN_TIME);
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void aBatchThatNeverEndsIsNeverPushedAndTheWaitTimesOut() {
        try (SimPair pair = new SimPair("push-hang", BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            pair.sim.hangNth(pair.p.engine(), 1);
            List<MoriStatus> statuses = post(pair, 1);

            TransferException error = catchThrowableOfType(TransferException.class,
                    () -> PushWait.failFast(Duration.ofMillis(200)).await(statuses).block());

            assertThat(error.kind()).isEqualTo(TransferException.Kind.TIMED_OUT);
            assertThat(error.code()).isEqualTo(StatusCode.IN_PROGRESS);
            statuses.forEach(MoriStatus::close);
            assertThat(MoriIo.simulator().statusesAwaitingPush()).isZero();
        }
    }

    @Test
    void anEngineThatOnlyTimesKeepsMoriModelAndStillKnowsWhenCopiesEnded() {
        try (SimPair pair = new SimPair("push-times", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.TIMES);
            List<MoriStatus> statuses = post(pair, BATCHES);

            assertThat(statuses).noneMatch(s -> s instanceof PushedStatus);
            // MoRI's model: a bounded wait queries once and sleeps to its deadline, as nothing completes the statuses
            // when their copies end (with ON the push would, and wake it: see the next test)
            long before = pair.sim.nowNanos();
            StatusCode code = pair.p.engine().waitAll(statuses, 400);
            // the copies are timed to end by 160 ms; MoRI's WaitAll truncates what is left of its deadline to whole
            // milliseconds, and sleeps to it however early they end
            assertThat(pair.sim.nowNanos() - before).isGreaterThan(Duration.ofMillis(390).toNanos());
            // on a loaded machine the copy thread may still be behind at the deadline: the wait's length is the claim
            assertThat(code).isIn(StatusCode.SUCCESS, StatusCode.IN_PROGRESS);
            PushWait.failFast(Duration.ofSeconds(10)).await(statuses).block();
            assertThat(statuses).allMatch(s -> s.completedAtNanos() == pair.sim.finishNanos(s));
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void anEngineThatPushesWakesABoundedNativeWaitAtTheCopiesEnd() {
        try (SimPair pair = new SimPair("push-native", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> statuses = post(pair, BATCHES);

            long before = pair.sim.nowNanos();
            assertThat(pair.p.engine().waitAll(statuses, 5_000)).isEqualTo(StatusCode.SUCCESS);

            assertThat(pair.sim.nowNanos() - before).isLessThan(Duration.ofSeconds(4).toNanos());
            statuses.forEach(MoriStatus::close);
        }
    }

    @Test
    void closingTheEngineEndsItsStatusesThatStillWaitForAPushWithBadState() {
        SimPair pair = new SimPair("push-close", BLOCK);
        pair.p.engine().push(PushMode.ON);
        pair.sim.hangNth(pair.p.engine(), 1);
        PushedStatus waiting = (PushedStatus) post(pair, 1).getFirst();
        assertThat(MoriIo.simulator().statusesAwaitingPush()).isEqualTo(1);

        pair.close();

        assertThat(MoriIo.simulator().statusesAwaitingPush()).isZero();
        assertThat(waiting.pushed().block(Duration.ofSeconds(1))).isEqualTo(StatusCode.ERR_BAD_STATE);
    }

    @Test
    void turningPushOffMakesLaterBatchesPolledStatusesThatStillComplete() {
        try (SimPair pair = new SimPair("push-off", BATCHES * BLOCK)) {
            pair.p.engine().push(PushMode.ON);
            List<MoriStatus> pushed = post(pair, 2);
            pair.p.engine().push(PushMode.OFF);
            List<MoriStatus> polled = post(pair, 2);

            assertThat(pushed).allMatch(s -> s instanceof PushedMoriStatus);
            assertThat(polled).noneMatch(s -> s instanceof PushedStatus);
            PushWait.failFast(Duration.ofSeconds(5)).await(polled).block();
            PushWait.failFast(Duration.ofSeconds(5)).await(pushed).block();
            pushed.forEach(MoriStatus::close);
            polled.forEach(MoriStatus::close);
            assertThat(MoriIo.simulator().statusesAwaitingPush()).isZero();
        }
    }
}
