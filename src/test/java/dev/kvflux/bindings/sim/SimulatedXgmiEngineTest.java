package dev.kvflux.bindings.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.Blocking;
import dev.kvflux.testing.ScriptedStatus;
import dev.kvflux.testing.SeedGeometry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

class SimulatedXgmiEngineTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();

    private SimulatedXgmiEngine engine(SimulatedXgmiEngine.Builder builder) {
        return builder.scheduler(clock).build();
    }

    private static TransferSession session(SimulatedXgmiEngine engine) {
        long bytes = SeedGeometry.SEED.regionBytes();
        return engine.createSession(engine.registerMemory(bytes, 0), engine.registerMemory(bytes, 1));
    }

    private long now() {
        return clock.now(TimeUnit.NANOSECONDS);
    }

    private void advanceTo(long nanos) {
        clock.advanceTimeBy(Duration.ofNanos(nanos - now()));
    }

    @Test
    void aStatusTurnsSuccessfulOnlyWhenQueriedAtOrAfterItsCopysFinish() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();

        advanceTo(finish - 1);
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
        advanceTo(finish);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void aStatusSaysItsCopyFinishedOnTheEnginesClockOnlyOnceAQuerySawItSucceed() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();

        advanceTo(finish + 5_000);
        assertThat(status.completedAtNanos()).as("not yet queried").isEqualTo(TransferStatus.UNKNOWN_TIME);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(status.completedAtNanos()).isEqualTo(finish);
        assertThat(status.clockNanos() - status.completedAtNanos()).isEqualTo(5_000);
    }

    @Test
    void theMoriIoMeasurementsGeometryFinishesAboutPointTwoSecondsAfterTheLastPost() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));
        long lastPost = now();
        long lastFinish = engine.copyFinishedAt(statuses.getLast()).orElseThrow();

        assertThat(Duration.ofNanos(lastFinish - lastPost))
                .isBetween(Duration.ofMillis(183), Duration.ofMillis(210));
    }

    @Test
    void copiesAreSerializedOnTheLinkInPostingOrder() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));
        BatchPlan plan = SeedGeometry.SEED.plan(0);
        long linkNanos = engine.timing().linkNanos(CopyPath.DEFAULT, plan.blocks(), plan.totalBytes());

        for (int i = 1; i < statuses.size(); i++) {
            long previous = engine.copyFinishedAt(statuses.get(i - 1)).orElseThrow();
            assertThat(engine.copyFinishedAt(statuses.get(i)).orElseThrow() - previous).isEqualTo(linkNanos);
        }
    }

    @Test
    void aSlowBatchSucceedsItsDelayAfterItsCopyWithoutHoldingUpTheNextBatch() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().fault(Fault.slow(0, Duration.ofMillis(300))));
        TransferSession session = session(engine);
        BatchPlan plan = SeedGeometry.SEED.plan(0);
        long linkNanos = engine.timing().linkNanos(CopyPath.DEFAULT, plan.blocks(), plan.totalBytes());
        TransferStatus slow = session.batchWrite(plan, 0);
        TransferStatus next = session.batchWrite(SeedGeometry.SEED.plan(1), 0);
        long nextFinish = engine.copyFinishedAt(next).orElseThrow();
        long late = engine.copyFinishedAt(slow).orElseThrow();

        assertThat(Duration.ofNanos(late - (nextFinish - linkNanos))).isEqualTo(Duration.ofMillis(300));
        advanceTo(nextFinish);
        assertThat(next.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(slow.code()).isEqualTo(StatusCode.IN_PROGRESS);
        advanceTo(late);
        assertThat(slow.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void aZeroTimeoutPollsOnceWithoutSleeping() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));

        assertThat(engine.waitAll(statuses, 0)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(now()).isZero();
        clock.advanceTimeBy(Duration.ofMillis(250));
        assertThat(engine.waitAll(statuses, 0)).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void underVirtualTimeABoundedWaitAllSleepsToItsDeadlineAndReturnsInProgressThoughEveryCopyFinished() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));

        CompletableFuture<StatusCode> call = Blocking.start(() -> engine.waitAll(statuses, 3_000));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);
        clock.advanceTimeBy(Duration.ofMillis(3_000).minusNanos(1));
        Blocking.assertStillBlocked(call);
        clock.advanceTimeBy(Duration.ofNanos(1));

        assertThat(Blocking.result(call)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(now()).isEqualTo(Duration.ofMillis(3_000).toNanos());
        assertThat(statuses).as("every copy finished long before the deadline")
                .allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
    }

    @Test
    void closingTheEngineEndsAWaitAllAsleepOnIt() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        List<TransferStatus> statuses = List.of(session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0));

        CompletableFuture<StatusCode> bounded = Blocking.start(() -> engine.waitAll(statuses, 60_000));
        CompletableFuture<StatusCode> unbounded = Blocking.start(() -> engine.waitAll(statuses, -1));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 2);
        engine.close();

        assertThat(Blocking.result(bounded)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(Blocking.result(unbounded)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(now()).isZero();
    }

    @Test
    void aBoundedWaitAllReturnsInProgressWhenAStatusIsStillInFlightAtItsDeadline() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));

        CompletableFuture<StatusCode> call = Blocking.start(() -> engine.waitAll(statuses, 500));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);
        clock.advanceTimeBy(Duration.ofMillis(500));

        assertThat(Blocking.result(call)).isEqualTo(StatusCode.IN_PROGRESS);
    }

    @Test
    void aNegativeTimeoutBlocksUntilEveryStatusIsTerminal() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        TransferSession session = session(engine);
        List<TransferStatus> statuses = List.of(session.batchWrite(SeedGeometry.SEED.plan(0), 0),
                session.batchWrite(SeedGeometry.SEED.plan(1), 1), session.batchWrite(SeedGeometry.SEED.plan(2), 2));
        long lastFinish = engine.copyFinishedAt(statuses.getLast()).orElseThrow();

        CompletableFuture<StatusCode> call = Blocking.start(() -> engine.waitAll(statuses, -1));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);
        advanceTo(lastFinish - 1);
        Blocking.assertStillBlocked(call);
        advanceTo(lastFinish);

        assertThat(Blocking.result(call)).isEqualTo(StatusCode.SUCCESS);
    }

    /** Two batches on {@code engine}, 5 ms after they were posted (when a failing one has failed). */
    private List<TransferStatus> twoBatches(SimulatedXgmiEngine engine) {
        TransferSession session = session(engine);
        List<TransferStatus> statuses = List.of(session.batchWrite(SeedGeometry.SEED.plan(0), 0),
                session.batchWrite(SeedGeometry.SEED.plan(1), 1));
        clock.advanceTimeBy(Duration.ofMillis(5));
        return statuses;
    }

    private SimulatedXgmiEngine failingAndStalled(long failing, long stalled) {
        return engine(SimulatedXgmiEngine.builder()
                .fault(Fault.fail(failing, Duration.ofMillis(5), StatusCode.ERR_GPU_OP, "hipErrorIllegalAddress"))
                .fault(Fault.stall(stalled)));
    }

    private StatusCode boundedWait(SimulatedXgmiEngine engine, List<TransferStatus> statuses) {
        CompletableFuture<StatusCode> call = Blocking.start(() -> engine.waitAll(statuses, 100));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);
        clock.advanceTimeBy(Duration.ofMillis(100));
        return Blocking.result(call);
    }

    @Test
    void inRealTimeTheClockHasNanosecondResolution() {
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();

        assertThat(java.util.stream.LongStream.generate(engine::nowNanos).limit(100))
                .as("not Reactor's wall clock in whole milliseconds")
                .anyMatch(t -> t % 1_000_000 != 0);
    }

    @Test
    void inRealTimeClosingTheEngineEndsAWaitAllAsleepOnIt() {
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().fault(Fault.stall(0)).build();
        List<TransferStatus> statuses = List.of(session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0));
        CompletableFuture<StatusCode> call = Blocking.start(() -> engine.waitAll(statuses, 60_000));
        Blocking.awaitTrue(() -> engine.sleepingWaits() == 1);

        engine.close();

        assertThat(Blocking.result(call)).isEqualTo(StatusCode.IN_PROGRESS);
    }

    @Test
    void aZeroTimeoutReturnsAFailureBehindAStatusInFlight() {
        SimulatedXgmiEngine engine = failingAndStalled(1, 0);

        assertThat(engine.waitAll(twoBatches(engine), 0)).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aBoundedWaitReturnsAFailureSeenBeforeTheDeadlineRatherThanInProgress() {
        SimulatedXgmiEngine engine = failingAndStalled(0, 1);

        assertThat(boundedWait(engine, twoBatches(engine))).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aBoundedWaitNeverSeesAFailureBehindAStatusStillInFlightAtTheDeadline() {
        SimulatedXgmiEngine engine = failingAndStalled(1, 0);

        assertThat(boundedWait(engine, twoBatches(engine))).isEqualTo(StatusCode.IN_PROGRESS);
    }

    @Test
    void aFailureIsSticky() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder()
                .fault(Fault.fail(0, Duration.ofMillis(5), StatusCode.ERR_GPU_OP, "hipErrorIllegalAddress")));
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        clock.advanceTimeBy(Duration.ofMillis(5));
        assertThat(status.code()).isEqualTo(StatusCode.ERR_GPU_OP);

        clock.advanceTimeBy(Duration.ofHours(1));

        assertThat(status.code()).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void anInitStatusCountsAsAnErrorInWaitAll() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        ScriptedStatus neverPosted = ScriptedStatus.initUntil(clock, Duration.ofHours(1));

        assertThat(engine.waitAll(List.of(neverPosted), 0)).isEqualTo(StatusCode.ERR_BAD_STATE);
        assertThat(engine.waitAll(List.of(neverPosted), 10)).isEqualTo(StatusCode.ERR_BAD_STATE);
    }

    @Test
    void aBatchRunningPastARegionIsRejectedWithAClearMessage() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        TransferSession small = engine.createSession(engine.registerMemory(1 << 20, 0),
                engine.registerMemory(SeedGeometry.SEED.regionBytes(), 1));

        assertThatThrownBy(() -> small.batchWrite(SeedGeometry.SEED.plan(1), 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("past the local region's 1048576 bytes");
        assertThat(engine.batchesPosted()).isZero();
    }

    @Test
    void anInjectedFaultFailsTheChosenBatchWithItsCodeAndMessageAtItsTime() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder()
                .fault(Fault.fail(2, Duration.ofMillis(40), StatusCode.ERR_RDMA_OP, "link reset")));
        List<TransferStatus> statuses = SeedGeometry.writeAll(session(engine));

        clock.advanceTimeBy(Duration.ofMillis(40).minusNanos(1));
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.IN_PROGRESS);
        clock.advanceTimeBy(Duration.ofNanos(1));
        assertThat(statuses.get(2).code()).isEqualTo(StatusCode.ERR_RDMA_OP);
        assertThat(statuses.get(2).message()).isEqualTo("link reset");
        clock.advanceTimeBy(Duration.ofSeconds(1));
        assertThat(statuses.stream().filter(s -> s.code() == StatusCode.SUCCESS)).hasSize(117);
    }

    @Test
    void aStalledBatchNeverCompletes() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);

        clock.advanceTimeBy(Duration.ofDays(1));
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
    }

    @Test
    void onTheScatterGatherPathACopyIsObservableOnlyAfterTheQueuedPrefillStepEnds() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().copyPath(CopyPath.SCATTER_GATHER));
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();
        long stepEnd = engine.prefillStepQueued(Duration.ofMillis(300));

        advanceTo(finish);
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
        advanceTo(stepEnd - 1);
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
        advanceTo(stepEnd);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void stepsQueuedAfterACopyFinishedDelayItNoFurther() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().copyPath(CopyPath.SCATTER_GATHER));
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();
        long firstStepEnd = engine.prefillStepQueued(Duration.ofMillis(300));

        advanceTo(finish + 1);
        engine.prefillStepQueued(Duration.ofMillis(300));
        advanceTo(firstStepEnd - 1);
        engine.prefillStepQueued(Duration.ofMillis(300));
        assertThat(status.code()).isEqualTo(StatusCode.IN_PROGRESS);
        advanceTo(firstStepEnd);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void stepsThatEndedAreForgottenWithoutChangingWhenACopyIsSeen() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder().copyPath(CopyPath.SCATTER_GATHER));
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();
        long stepEnd = engine.prefillStepQueued(Duration.ofMillis(300));
        for (int i = 0; i < 1000; i++) {
            advanceTo(stepEnd + 1);
            stepEnd = engine.prefillStepQueued(Duration.ofMillis(1));
        }

        assertThat(engine.prefillStepsKept()).isEqualTo(1);
        assertThat(finish).isLessThan(stepEnd);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void onTheDefaultPathPrefillStepsDelayNoCopy() {
        SimulatedXgmiEngine engine = engine(SimulatedXgmiEngine.builder());
        TransferStatus status = session(engine).batchWrite(SeedGeometry.SEED.plan(0), 0);
        long finish = engine.copyFinishedAt(status).orElseThrow();
        engine.prefillStepQueued(Duration.ofMillis(300));

        advanceTo(finish);
        assertThat(status.code()).isEqualTo(StatusCode.SUCCESS);
    }
}
