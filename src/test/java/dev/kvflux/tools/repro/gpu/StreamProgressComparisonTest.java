package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproRun;
import dev.kvflux.tools.repro.ReproSettings;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What {@code kvflux repro --stream-progress both} prints after its two runs. */
class StreamProgressComparisonTest {
    private static final int STATUSES = 118;

    private static ReproRun.Wait wait(long queries, double lagMs, boolean shared) {
        long waitQueries = shared ? 0 : queries - STATUSES;
        return new ReproRun.Wait(0.01, STATUSES, STATUSES, null, Map.of(
                GpuTarget.EVENT_QUERIES_PER_STATUS, (double) queries / STATUSES,
                GpuTarget.WAIT_EVENT_QUERIES_PER_STATUS, (double) waitQueries / STATUSES,
                GpuTarget.DETECTION_LAG_MS, lagMs));
    }

    private static ReproRun.Result result(ReproRun.StrategyResult... strategies) {
        return new ReproRun.Result("cuda", ReproGeometry.VLLM_MORI_IO, new ReproSettings(Duration.ofSeconds(30),
                Duration.ofMillis(10), KvfluxConfig.defaults()), List.of(strategies), Map.of());
    }

    @Test
    void theRatioLineDividesUnsharedBySharedQueriesPerStatusOverAllRequests() {
        ReproRun.Result shared = result(
                new ReproRun.StrategyResult("reactive", List.of(wait(100, 1.0, true), wait(136, 3.0, true))),
                new ReproRun.StrategyResult("reactive-push", List.of(wait(118, 0.1, true))));
        ReproRun.Result unshared = result(
                new ReproRun.StrategyResult("reactive", List.of(wait(5900, 2.0, false))));

        assertThat(StreamProgressComparison.lines(shared, unshared)).containsExactly("reactive: native event queries"
                + " per status 50.00 unshared, 1.00 shared (50.0x fewer shared); in the wait alone 49.00 unshared, 0.00"
                + " shared (all fewer shared); detection lag median 2.000 ms unshared, 2.000 ms shared");
    }
}
