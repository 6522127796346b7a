package dev.kvflux.pipeline.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault matrix at a small count, against real prefill and decode processes: every fault leaves no
 * request unfinished, nothing held on either side, no corrupt output, and requests succeed after it.
 * The full count runs through {@code kvflux chaos}.
 */
class ChaosRunTest {

    @Test
    void everyFaultEndsEveryRequestAndLeavesNothingHeld(@TempDir Path logs) throws Exception {
        List<ChaosRun.FaultResult> results = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                ChaosRun.FAULTS, logs)).run(line -> { });

        assertThat(results).extracting(ChaosRun.FaultResult::fault).containsExactlyElementsOf(ChaosRun.FAULTS);
        assertThat(results).allSatisfy(r -> {
            assertThat(r.requests()).as(r.fault()).isEqualTo(6);
            assertThat(r.neverFinished()).as(r.fault() + " never finished").isZero();
            assertThat(r.leakedBlocks()).as(r.fault() + " leaked blocks").isZero();
            assertThat(r.leakedHandles()).as(r.fault() + " leaked handles").isZero();
            assertThat(r.corruptOutputs()).as(r.fault() + " corrupt").isZero();
            assertThat(r.failedWithoutReason()).as(r.fault() + " failed without a reason " + r.reasons()).isZero();
            assertThat(r.completed()).as(r.fault() + " completed some").isPositive();
            assertThat(r.recoverySeconds()).as(r.fault() + " recovered").isNotNegative();
        });
        assertThat(results.stream().filter(r -> r.fault().equals("validation-rejects")).findFirst().orElseThrow()
                .failedCleanly()).isEqualTo(2);
        assertThat(results).filteredOn(r -> r.fault().startsWith("status-") || r.fault().equals("burst"))
                .as("each injected fault failed some requests").allSatisfy(r -> assertThat(r.failedCleanly()).isPositive());
    }
}
