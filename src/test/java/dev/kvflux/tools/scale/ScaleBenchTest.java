package dev.kvflux.tools.scale;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A small run of the scale bench: every wait ends, and the figures are the ones the table prints. */
class ScaleBenchTest {
    private static ScaleBench.Settings small(List<String> strategies) {
        return new ScaleBench.Settings(List.of(20), strategies, 8, Duration.ofMillis(50), 1, 0,
                Duration.ofMillis(10), Duration.ofSeconds(30), 7);
    }

    @Test
    void aPushWaitTakesEveryStatusThroughItsListenerWithOneLookPerWaitAndEveryWaitEndsWithoutError() {
        ScaleRow row = ScaleBench.run(small(List.of("reactive-push")), line -> { }).getFirst();
        assertThat(row.errors()).isZero();
        assertThat(row.unfinished()).isZero();
        assertThat(row.queriesPerStatus()).as("no poll: at most the look at the newest status in flight, of 8 a wait")
                .isLessThanOrEqualTo(1.0 / 8);
        assertThat(row.lagP50Ms()).isLessThanOrEqualTo(row.lagP99Ms()).isLessThanOrEqualTo(row.lagMaxMs());
        assertThat(row.bytesPerStatusTick()).isNaN();
    }

    @Test
    void vllmsOneMillisecondSweepEndsEveryWaitQueryingEachStatusMoreThanOnce() {
        ScaleRow row = ScaleBench.run(small(List.of("poll-1ms")), line -> { }).getFirst();
        assertThat(row.strategy()).isEqualTo("poll-1ms");
        assertThat(row.errors()).isZero();
        assertThat(row.unfinished()).isZero();
        assertThat(row.queriesPerStatus()).as("statuses finish within 50 ms: swept more than once").isGreaterThan(1.0);
        assertThat(row.bytesPerStatusTick()).isNotNaN();
    }

    /**
     * 2,000 statuses due 10 us apart (20 ms in all) with a 5 ms tick: every one is finished, none before it is
     * due, and the notifier wakes at most once per tick (an upper bound: a slow machine wakes fewer times).
     */
    @Test
    void aNotifierWithATickFinishesEveryStatusNoEarlierThanDueWakingAtMostOncePerTick() {
        int count = 2000;
        long step = java.util.concurrent.TimeUnit.MICROSECONDS.toNanos(10);
        BenchStatus[] all = new BenchStatus[count];
        long[] schedule = new long[count];
        for (int i = 0; i < count; i++) {
            all[i] = new BenchStatus(false);
            schedule[i] = (i * step) << 24 | i;
        }
        long start = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(5);
        long tick = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(5);
        BenchNotifier notifier = new BenchNotifier(all, schedule, start, tick);
        notifier.run();

        for (int i = 0; i < count; i++) {
            assertThat(all[i].code()).isEqualTo(dev.kvflux.bindings.StatusCode.SUCCESS);
            assertThat(all[i].finishedAt() - (start + i * step)).as("status %d", i).isNotNegative();
        }
        long spanned = System.nanoTime() - start;
        assertThat(notifier.wakes()).isPositive().isLessThanOrEqualTo((int) (spanned / tick) + 1);
    }

    @Test
    void aNotifierTickOutOfRangeIsRefusedWithTheRange() {
        assertThatThrownBy(() -> new ScaleBench.Settings(List.of(20), List.of("reactive-push"), 8, Duration.ofMillis(50),
                1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7, List.of("none"), 1, Duration.ofMillis(11)))
                .hasMessage("--notifier-tick must lie between 0 and 10ms, got 11ms");
    }

    @Test
    void severalNotifierThreadsPushEveryStatusAndTheirPartOfTheLagIsNeverMoreThanTheLag() {
        ScaleBench.Settings three = new ScaleBench.Settings(List.of(20), List.of("reactive-push"), 8,
                Duration.ofMillis(50), 1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7, List.of("none"), 3);
        ScaleRow row = ScaleBench.run(three, line -> { }).getFirst();

        assertThat(row.notifiers()).isEqualTo(3);
        assertThat(row.errors()).isZero();
        assertThat(row.unfinished()).isZero();
        assertThat(row.queriesPerStatus()).isLessThanOrEqualTo(1.0 / 8);
        // each request's notifier part (its last status pushed late) is within its whole lag, so their p99 too
        assertThat(row.notifierLagP99Ms()).isNotNegative().isLessThanOrEqualTo(row.lagP99Ms());
        assertThat(ScaleReport.table(List.of(row))).contains("notif p99", "3 notifier threads");
        assertThat(ScaleReport.json(List.of(row), three)).contains("\"notifiers\" : 3", "\"notifier_lag_p99_ms\"");
        assertThatThrownBy(() -> new ScaleBench.Settings(List.of(20), List.of("reactive-push"), 8, Duration.ofMillis(50),
                1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7, List.of("none"), 0))
                .hasMessage("--notifiers must lie between 1 and 64, got 0");
    }

    @Test
    void aPollingWaitQueriesStatusesSeveralTimesAndMeasuresItsSteadyStateAllocation() {
        ScaleRow row = ScaleBench.run(small(List.of("reactive")), line -> { }).getFirst();
        assertThat(row.errors()).isZero();
        assertThat(row.unfinished()).isZero();
        assertThat(row.queriesPerStatus()).isGreaterThan(1.0);
        assertThat(row.bytesPerStatusTick()).isNotNaN();
        assertThat(ScaleReport.table(List.of(row))).contains("reactive", "20");
        assertThat(ScaleReport.json(List.of(row), small(List.of("reactive")))).contains("\"code_calls_per_status\"");
    }

    @Test
    void withBothRecordersEachStrategyGetsTwoRowsAndTheTablePrintsTheRecordersCostPerRoundPair() {
        ScaleBench.Settings both = new ScaleBench.Settings(List.of(20), List.of("reactive-shared"), 8,
                Duration.ofMillis(50), 2, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7,
                List.of("none", "micrometer"));
        List<String> progress = new java.util.concurrent.CopyOnWriteArrayList<>();
        List<ScaleRow> rows = ScaleBench.run(both, progress::add);

        assertThat(rows).extracting(ScaleRow::recorder).containsExactly("none", "micrometer");
        assertThat(rows).allSatisfy(row -> {
            assertThat(row.errors()).isZero();
            assertThat(row.unfinished()).isZero();
            assertThat(row.roundCpuMillis()).hasSize(2).allSatisfy(ms -> assertThat(ms).isPositive());
        });
        assertThat(progress).anySatisfy(line -> assertThat(line).contains("micrometer: kvflux.wait.detection.lag over 40 waits"));
        assertThat(progress).anySatisfy(line -> assertThat(line).containsPattern(
                "recorder cost estimate: \\d+\\.\\d calls per wait, \\d+\\.\\d\\d us of recording CPU per wait"));
        assertThat(ScaleReport.table(rows)).contains("reactive-shared +micrometer", "recorder cost, reactive-shared at N = 20");
        assertThat(ScaleReport.json(rows, both)).contains("\"recorder\" : \"micrometer\"", "\"round_cpu_ms\"");
    }

    @Test
    void theBenchTimesTheEngineFreeStrategiesOfTheReproducerFailingFastThenDraining() {
        assertThat(ScaleBench.STRATEGIES).containsExactly("poll-1ms", "reactive", "reactive-shared",
                "reactive-adaptive", "reactive-push", "reactive-push-direct", "poll-1ms-drain", "reactive-drain",
                "reactive-shared-drain", "reactive-adaptive-drain", "reactive-push-drain", "reactive-push-direct-drain");
        assertThat(ScaleBench.strategy("poll-1ms-drain", small(List.of("reactive")))).isInstanceOfSatisfying(
                dev.kvflux.tools.repro.SweepWait.class, w -> assertThat(w.mode())
                        .isEqualTo(dev.kvflux.operators.FailMode.DRAIN));
        assertThat(ScaleBench.strategy("reactive-shared-drain", small(List.of("reactive")))).isInstanceOfSatisfying(
                dev.kvflux.operators.CompletionWait.class, w -> {
                    assertThat(w.isSharedPoll()).isTrue();
                    assertThat(w.mode()).isEqualTo(dev.kvflux.operators.FailMode.DRAIN);
                    assertThat(w.slice()).isEqualTo(Duration.ofMillis(10));
                });
        assertThat(ScaleBench.pushes("reactive-push-drain")).isTrue();
        assertThatThrownBy(() -> small(List.of("native"))).hasMessageContaining("unknown strategy 'native'");
    }

    @Test
    void anUnknownRecorderIsRefusedWithTheChoices() {
        assertThatThrownBy(() -> new ScaleBench.Settings(List.of(20), List.of("reactive"), 8, Duration.ofMillis(50), 1, 0,
                Duration.ofMillis(10), Duration.ofSeconds(30), 7, List.of("prometheus")))
                .hasMessageContaining("--recorder takes none, micrometer or both");
    }

    @Test
    void anUnknownStrategyOrAnOversizedRunIsRefusedWithTheChoices() {
        assertThatThrownBy(() -> small(List.of("fastest")))
                .hasMessageContaining("unknown strategy 'fastest'").hasMessageContaining("reactive-push");
        assertThatThrownBy(() -> new ScaleBench.Settings(List.of(100_000), List.of("reactive"), 118,
                Duration.ofSeconds(1), 1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 1))
                .hasMessageContaining("N x statuses must be at most");
    }
}
