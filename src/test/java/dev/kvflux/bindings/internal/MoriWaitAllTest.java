package dev.kvflux.bindings.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * MoRI's WaitAll over statuses that complete only when queried, on a fake clock: virtual time that a
 * sleep advances to its deadline, and that each clock reading may advance by a chosen cost.
 */
class MoriWaitAllTest {
    private static final long MS = 1_000_000;

    private final VirtualTimeScheduler time = VirtualTimeScheduler.create();
    private final List<Long> sleeps = new ArrayList<>();
    private long readCostNanos;
    private final MoriWaitAll waitAll = new MoriWaitAll(new TransferEngine.WaitClock() {
        @Override
        public long nanoTime() {
            if (readCostNanos > 0) {
                time.advanceTimeBy(Duration.ofNanos(readCostNanos));
            }
            return now();
        }

        @Override
        public boolean sleepUntil(long deadlineNanos) {
            sleeps.add(deadlineNanos);
            if (deadlineNanos > now()) {
                time.advanceTimeBy(Duration.ofNanos(deadlineNanos - now()));
            }
            return true;
        }
    });

    private long now() {
        return time.now(TimeUnit.NANOSECONDS);
    }

    private List<ScriptedStatus> measuredLayers(int count) {
        return IntStream.range(0, count)
                .mapToObj(i -> ScriptedStatus.succeedsAt(time, Duration.ofMillis(100 + i)))
                .toList();
    }

    @Test
    void withAZeroCostClockTheStatusAfterTheFirstInFlightOneFindsTheDeadlinePassed() {
        ScriptedStatus first = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        ScriptedStatus second = ScriptedStatus.succeedsAt(time, Duration.ofMillis(6));

        assertThat(waitAll.waitAll(List.of(first, second), 3000)).isEqualTo(StatusCode.IN_PROGRESS);

        assertThat(now()).isEqualTo(3000 * MS);
        assertThat(first.code()).isEqualTo(StatusCode.SUCCESS);
        assertThat(second.queries()).as("never polled before the wait gave up").isZero();
        assertThat(second.code()).as("its copy had finished all along").isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void whenTheClockAdvancesLessThanTheTruncatedMillisecondTheRestArePolledAndSucceedJustUnderTheDeadline() {
        readCostNanos = 1_000;
        List<ScriptedStatus> layers = measuredLayers(118);

        assertThat(waitAll.waitAll(layers, 30_000)).isEqualTo(StatusCode.SUCCESS);

        assertThat(now()).isBetween(29_999 * MS, 30_000 * MS - 1);
        assertThat(layers.subList(1, 118)).allSatisfy(s -> assertThat(s.queries()).isEqualTo(1));
    }

    @Test
    void whenPollingTheRestOutlastsTheLastMillisecondTheWaitIsInProgressAtTheDeadline() {
        readCostNanos = 10_000;
        List<ScriptedStatus> layers = measuredLayers(118);

        assertThat(waitAll.waitAll(layers, 30_000)).isEqualTo(StatusCode.IN_PROGRESS);

        assertThat(now()).isBetween(30_000 * MS, 30_001 * MS);
        assertThat(layers).allSatisfy(s -> assertThat(s.code()).isEqualTo(StatusCode.SUCCESS));
    }

    @Test
    void theTimeLeftIsTruncatedToWholeMilliseconds() {
        TransferStatus slowQuery = new TransferStatus() {
            @Override
            public StatusCode code() {
                time.advanceTimeBy(Duration.ofNanos(300_000));
                return StatusCode.SUCCESS;
            }

            @Override
            public String message() {
                return "";
            }
        };

        assertThat(waitAll.waitAll(List.of(slowQuery, ScriptedStatus.never(time)), 3)).isEqualTo(StatusCode.IN_PROGRESS);

        assertThat(sleeps).as("2.7 ms left: WaitFor(2), so one sleep to 0.3 + 2 ms").containsExactly(2_300_000L);
    }

    @Test
    void aFailureSeenBeforeTheDeadlineIsRememberedWhileTheRestAreWaitedAndWinsOverInProgress() {
        ScriptedStatus failed = ScriptedStatus.failsAt(time, Duration.ZERO, StatusCode.ERR_GPU_OP, "copy failed");
        ScriptedStatus stuck = ScriptedStatus.never(time);

        assertThat(waitAll.waitAll(List.of(failed, stuck), 3000)).isEqualTo(StatusCode.ERR_GPU_OP);

        assertThat(now()).as("the stuck status was still waited").isEqualTo(3000 * MS);
    }

    @Test
    void theFirstFailureInTheListGivesTheCode() {
        List<ScriptedStatus> statuses = List.of(
                ScriptedStatus.succeedsAt(time, Duration.ZERO),
                ScriptedStatus.failsAt(time, Duration.ZERO, StatusCode.ERR_RDMA_OP, "first"),
                ScriptedStatus.failsAt(time, Duration.ZERO, StatusCode.ERR_GPU_OP, "second"));

        assertThat(waitAll.waitAll(statuses, 3000)).isEqualTo(StatusCode.ERR_RDMA_OP);
    }

    @Test
    void aCopyStillRunningAtTheFirstPollCostsTheWholeTimeout() {
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));

        assertThat(waitAll.waitAll(List.of(status), 3000)).isEqualTo(StatusCode.SUCCESS);

        assertThat(now()).isEqualTo(3000 * MS);
        assertThat(status.queries()).isEqualTo(2);
    }

    @Test
    void copiesDoneAtTheFirstPollReturnAtOnce() {
        assertThat(waitAll.waitAll(List.of(ScriptedStatus.succeedsAt(time, Duration.ZERO)), 3000))
                .isEqualTo(StatusCode.SUCCESS);

        assertThat(now()).isZero();
    }

    @Test
    void aZeroTimeoutPollsEachStatusOnce() {
        ScriptedStatus inFlight = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        ScriptedStatus done = ScriptedStatus.succeedsAt(time, Duration.ZERO);

        assertThat(waitAll.waitAll(List.of(inFlight, done), 0)).isEqualTo(StatusCode.IN_PROGRESS);

        assertThat(inFlight.queries()).isEqualTo(1);
        assertThat(done.queries()).isEqualTo(1);
        assertThat(now()).isZero();
    }

    @Test
    void aZeroTimeoutReturnsAFailureBehindAStatusInFlight() {
        List<ScriptedStatus> statuses = List.of(ScriptedStatus.never(time),
                ScriptedStatus.failsAt(time, Duration.ZERO, StatusCode.ERR_GPU_OP, "copy failed"));

        assertThat(waitAll.waitAll(statuses, 0)).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aNegativeTimeoutBlocksUntilEveryStatusIsTerminal() {
        ScriptedStatus early = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));
        ScriptedStatus late = ScriptedStatus.succeedsAt(time, Duration.ofMillis(40));

        assertThat(waitAll.waitAll(List.of(early, late), -1)).isEqualTo(StatusCode.SUCCESS);

        assertThat(now()).isBetween(40 * MS, 41 * MS);
    }

    @Test
    void aNegativeTimeoutUsesTheEnginesBlocker() {
        List<TransferStatus> blocked = new ArrayList<>();
        MoriWaitAll synchronizing = new MoriWaitAll(new TransferEngine.WaitClock() {
            @Override
            public long nanoTime() {
                return now();
            }

            @Override
            public boolean sleepUntil(long deadlineNanos) {
                throw new AssertionError("an unbounded wait with a blocker does not sleep on the clock");
            }
        }, status -> {
            blocked.add(status);
            time.advanceTimeBy(Duration.ofMillis(5));
            return true;
        });
        ScriptedStatus status = ScriptedStatus.succeedsAt(time, Duration.ofMillis(5));

        assertThat(synchronizing.waitAll(List.of(status), -1)).isEqualTo(StatusCode.SUCCESS);

        assertThat(blocked).containsExactly(status);
    }

    @Test
    void aStatusNeverPostedIsTheFailureBadState() {
        ScriptedStatus neverPosted = ScriptedStatus.initUntil(time, Duration.ofMillis(5));

        assertThat(waitAll.waitAll(List.of(neverPosted), 3000)).isEqualTo(StatusCode.ERR_BAD_STATE);
        assertThat(waitAll.waitAll(List.of(neverPosted), 0)).isEqualTo(StatusCode.ERR_BAD_STATE);
        assertThat(waitAll.waitAll(List.of(neverPosted), -1)).isEqualTo(StatusCode.ERR_BAD_STATE);
    }

    @Test
    void nullEntriesAreSkipped() {
        List<TransferStatus> statuses = Arrays.asList(null, ScriptedStatus.succeedsAt(time, Duration.ZERO), null);

        assertThat(waitAll.waitAll(statuses, 3000)).isEqualTo(StatusCode.SUCCESS);
        assertThat(waitAll.waitAll(statuses, 0)).isEqualTo(StatusCode.SUCCESS);
        assertThat(waitAll.waitAll(statuses, -1)).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void anEmptyListSucceeds() {
        assertThat(waitAll.waitAll(List.of(), 3000)).isEqualTo(StatusCode.SUCCESS);
    }

    @Test
    void anInterruptedWaitReturnsInProgressAtOnceAndKeepsTheInterruptFlag() {
        MoriWaitAll system = new MoriWaitAll(MoriWaitAll.systemClock());
        StatusCode[] codes = new StatusCode[2];

        assertTimeoutPreemptively(Duration.ofSeconds(5), () -> {
            Thread.currentThread().interrupt();
            codes[0] = system.waitAll(List.of(ScriptedStatus.never(time)), 60_000);
            codes[1] = system.waitAll(List.of(ScriptedStatus.never(time)), -1);
            assertThat(Thread.interrupted()).as("the interrupt flag is kept").isTrue();
        });

        assertThat(codes).containsExactly(StatusCode.IN_PROGRESS, StatusCode.IN_PROGRESS);
    }

    @Test
    void closingTheSystemClockEndsAWaitAsleepOnIt() throws Exception {
        MoriWaitAll.SystemClock clock = MoriWaitAll.systemClock();
        MoriWaitAll system = new MoriWaitAll(clock);
        CompletableFuture<StatusCode> call = CompletableFuture.supplyAsync(
                () -> system.waitAll(List.of(ScriptedStatus.never(time)), 60_000));
        Thread.sleep(50);

        clock.close();

        assertThat(call.get(5, TimeUnit.SECONDS)).isEqualTo(StatusCode.IN_PROGRESS);
        assertThat(system.waitAll(List.of(ScriptedStatus.never(time)), -1)).isEqualTo(StatusCode.IN_PROGRESS);
    }
}
