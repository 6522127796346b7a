package dev.kvflux.tools.scale;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The bench's backend measured with no wait, and each row's share of the CPU that is its wait's. */
class BackendAloneTest {
    private static final ScaleBench.Settings SMALL = new ScaleBench.Settings(List.of(20), List.of("poll-1ms"), 8,
            Duration.ofMillis(50), 1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7);

    @Test
    void aPlanHoldsEveryStatusOnceInTimeOrderWithEachRequestsLastOffset() {
        RoundPlan plan = RoundPlan.draw(20, 8, Duration.ofMillis(50).toNanos(), false, new SplittableRandom(3));

        assertThat(plan.all()).hasSize(160);
        assertThat(plan.schedule()).isSorted();
        assertThat(java.util.Arrays.stream(plan.schedule()).map(e -> e & 0xFF_FFFF).sorted().toArray())
                .containsExactly(java.util.stream.LongStream.range(0, 160).toArray());
        long[] last = new long[20];
        for (long entry : plan.schedule()) {
            int request = (int) (entry & 0xFF_FFFF) / 8;
            last[request] = Math.max(last[request], entry >>> 24);
        }
        assertThat(plan.lastOffset()).containsExactly(last);
    }

    @Test
    void theBackendAloneFinishesEveryStatusAtItsTimeWithNothingQueryingIt() {
        RoundPlan plan = RoundPlan.draw(20, 8, Duration.ofMillis(50).toNanos(), false, new SplittableRandom(3));

        long[] round = BackendAlone.round(plan, SMALL);

        long latest = java.util.Arrays.stream(plan.lastOffset()).max().orElseThrow();
        assertThat(plan.all()).allSatisfy(status -> {
            assertThat(status.queries).isZero();
            assertThat(status.completedAtNanos()).as("finished").isNotEqualTo(dev.kvflux.bindings.TransferStatus.UNKNOWN_TIME);
        });
        assertThat(round[0]).as("CPU time (the process's clock ticks in 10 ms steps)").isNotNegative();
        assertThat(round[1]).as("wall time: to the last status, due %d ns in", latest).isGreaterThanOrEqualTo(latest);
    }

    @Test
    void everyRowCarriesTheBackendsCoresAtItsNAndReportsItsCoresLessThoseAsTheWaits() throws Exception {
        ScaleBench.Settings two = new ScaleBench.Settings(List.of(10, 20), List.of("poll-1ms", "reactive-push"), 8,
                Duration.ofMillis(50), 1, 0, Duration.ofMillis(10), Duration.ofSeconds(30), 7);
        List<String> progress = new java.util.concurrent.CopyOnWriteArrayList<>();
        List<ScaleRow> rows = ScaleBench.run(two, progress::add);

        assertThat(progress).contains("the backend alone (no wait) at N = 10 ...", "the backend alone (no wait) at N = 20 ...");
        assertThat(rows).hasSize(4).allSatisfy(row -> {
            assertThat(row.backendCores()).isNotNegative().isFinite();
            assertThat(row.waitCores()).isEqualTo(row.coresUsed() - row.backendCores());
        });
        assertThat(rows.get(0).backendCores()).isEqualTo(rows.get(1).backendCores());
        assertThat(rows.get(2).backendCores()).isEqualTo(rows.get(3).backendCores());
        JsonNode json = new ObjectMapper().readTree(ScaleReport.json(rows, two));
        for (int i = 0; i < rows.size(); i++) {
            assertThat(json.path("rows").path(i).path("backend_cores").asDouble()).isEqualTo(rows.get(i).backendCores());
            assertThat(json.path("rows").path(i).path("wait_cores").asDouble()).isEqualTo(rows.get(i).waitCores());
        }
        String table = ScaleReport.table(rows);
        assertThat(table).contains(" wait ").contains(String.format(java.util.Locale.ROOT, "%.2f at N = 10, %.2f at N = 20",
                rows.get(0).backendCores(), rows.get(2).backendCores()));
        assertThat(table.lines().filter(line -> line.startsWith("poll-1ms")).findFirst().orElseThrow())
                .contains(String.format(java.util.Locale.ROOT, "%6.2f %6.2f %6.2f", rows.get(0).coresUsed(),
                        rows.get(0).notifierCores(), rows.get(0).waitCores()));
    }
}
