package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.ServingModel;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** serve-bench with its proxy, prefill and decode as processes of their own, as the GPU backends run it. */
class ServeBenchProcessesTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 2, Duration.ofMillis(2), 64,
            1152);

    private static ServeBench.Settings settings(String backend, boolean processes, Path logs) {
        return new ServeBench.Settings(List.of(Policy.KVFLUX), List.of(2), List.of(6), 200, 2, Duration.ofSeconds(3),
                null, false, FaultPlan.NONE, SMALL, Duration.ofSeconds(30), 0, 0, null,
                new ServeBench.Roles(backend, processes, 256, 0, logs));
    }

    @Test
    void theRolesAsProcessesOverTheCSimulatorServeEveryRequestAndLogWhereTold(@TempDir Path logs) throws Exception {
        ByteArrayOutputStream progress = new ByteArrayOutputStream();

        List<BenchRow> rows = new ServeBench(settings("native-sim", true, logs),
                new PrintStream(progress, true, StandardCharsets.UTF_8)).run();

        assertThat(rows).hasSize(1);
        assertThat(rows.getFirst().load().completed()).isEqualTo(6);
        assertThat(rows.getFirst().load().neverFinished()).isZero();
        assertThat(rows.getFirst().failedWaitsInProgress()).isZero();
        assertThat(progress.toString(StandardCharsets.UTF_8)).contains("as processes")
                .contains("decode checked the KV of 6 requests: 6 whole, 0 corrupt");
        try (var files = Files.list(logs)) {
            assertThat(files.map(f -> f.getFileName().toString()).toList())
                    .anyMatch(n -> n.endsWith("-decode.log")).anyMatch(n -> n.endsWith("-prefill.log"));
        }
    }

    @Test
    void aGpuBackendAlwaysRunsTheRolesAsProcessesAndAnUnknownOneIsRefused() {
        assertThat(new ServeBench.Roles("cuda", false, 256, 0, null).processes()).isTrue();
        assertThatThrownBy(() -> settings("rdma", true, null)).hasMessageContaining("not on 'rdma'");
    }
}
