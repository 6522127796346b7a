package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.role.Policy;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The benchmark's machine and HTML outputs. */
class BenchReportTest {
    private static final List<BenchRow> ROWS = List.of(
            new BenchRow(Policy.LEGACY, 8, 3, new LoadResult(List.of(RequestResult.neverFinished(Double.NaN),
                    RequestResult.neverFinished(Double.NaN), RequestResult.neverFinished(Double.NaN)), 20), 0, 0, 0, 0),
            new BenchRow(Policy.KVFLUX, 8, 3, new LoadResult(List.of(RequestResult.completed(1.0, 1.3),
                    RequestResult.completed(2.0, 2.3), RequestResult.failed(Double.NaN, "503 write_failed")), 2), 0, 1, 1, 0));

    @Test
    void jsonHasEveryResultKeyAndNullForATtftWithNoCompletedRequest() {
        JsonNode root = HttpJson.object(BenchReport.json(ROWS, Map.of("transfer_timeout", "3s")));

        JsonNode legacy = root.at("/results/0");
        for (String key : List.of("policy", "concurrency", "completed", "failed", "never_finished",
                "failed_waits_in_progress", "request_throughput", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s")) {
            assertThat(legacy.has(key)).as(key).isTrue();
        }
        assertThat(legacy.get("never_finished").asInt()).isEqualTo(3);
        assertThat(legacy.get("ttft_p90_s").isNull()).isTrue();
        JsonNode kvflux = root.at("/results/1");
        assertThat(kvflux.get("ttft_mean_s").asDouble()).isEqualTo(1.5);
        assertThat(kvflux.get("request_throughput").asDouble()).isEqualTo(1.0);
    }

    @Test
    void htmlPageHasOneTtftPlotPerPolicy() {
        String page = BenchReport.html(ROWS, Map.of("transfer_timeout", "3s"), 3);

        assertThat(page.split("<svg", -1)).hasSize(3);
        assertThat(page).contains("<h2>legacy: client TTFT distribution</h2>", "<h2>kvflux: client TTFT distribution</h2>",
                "c=8: 2/3 done", "503 write_failed");
    }
}
