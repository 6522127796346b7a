package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * The fault matrix at a small count against real prefill and decode processes, in three runs (the faults
 * that share one prefill and decode, those that need their own, and a status failure per failure code):
 * every fault leaves no request
 * unfinished or failed without a reason, nothing held on either side, no corrupt output, and requests
 * succeed after it. The full count runs through {@code kvflux chaos}.
 */
class ChaosRunTest {
    static final List<List<String>> GROUPS = List.of(
            ChaosRun.FAULTS.stream().filter(f -> !f.equals("burst") && !f.startsWith("status-")
                    && !f.equals("sg-under-load")).toList(),
            List.of("burst", "status-stall", "status-slow", "sg-under-load"),
            List.copyOf(ChaosRun.STATUS_FAILURES.keySet()));

    @Test
    void thereIsAStatusFailureForEveryFailureCode() {
        assertThat(ChaosRun.STATUS_FAILURES.values()).containsExactlyInAnyOrderElementsOf(
                java.util.Arrays.stream(StatusCode.values()).filter(StatusCode::isFailure).toList());
    }

    @Test
    void theGroupsCoverEveryFault() {
        assertThat(GROUPS.stream().flatMap(List::stream)).containsExactlyInAnyOrderElementsOf(ChaosRun.FAULTS);
    }

    @ParameterizedTest
    @FieldSource("GROUPS")
    void everyRequestEndsWithAReasonAndNothingStaysHeld(List<String> faults, @TempDir Path logs) throws Exception {
        List<ChaosRun.FaultResult> results = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                faults, logs)).run(line -> { });

        assertThat(results).extracting(ChaosRun.FaultResult::fault).containsExactlyElementsOf(faults);
        results.forEach(ChaosRunTest::check);
    }

    private static void check(ChaosRun.FaultResult r) {
        String fault = r.fault();
        assertThat(r.requests()).as(fault).isEqualTo(6);
        assertThat(r.neverFinished()).as(fault + " never finished").isZero();
        assertThat(r.failedWithoutReason()).as(fault + " failed without a reason " + r.reasons()).isZero();
        assertThat(r.leakedBlocks()).as(fault + " leaked blocks").isZero();
        assertThat(r.leakedHandles()).as(fault + " leaked handles").isZero();
        assertThat(r.corruptOutputs()).as(fault + " corrupt outputs").isZero();
        assertThat(r.completed()).as(fault + " completed some").isPositive();
        assertThat(r.recoverySeconds()).as(fault + " recovered").isNotNegative();
        if (fault.equals("validation-rejects")) {
            assertThat(r.failedCleanly()).isEqualTo(2);
        }
        if (fault.startsWith("status-fail-") || fault.equals("status-stall") || fault.equals("burst")) {
            assertThat(r.failedCleanly()).as(fault + ": the injected fault failed some requests").isPositive();
        }
        if (fault.equals("status-slow") || fault.equals("sg-under-load") || fault.equals("notify-reorder")) {
            assertThat(r.completed()).as(fault + ": late copies and swapped notifications still complete "
                    + r.reasons()).isEqualTo(r.requests());
            assertThat(r.failedCleanly()).as(fault + " failed none").isZero();
        }
        if (fault.equals("client-disconnect")) {
            // two clients hang up 1-30 ms in; one whose answer came sooner counts as completed
            assertThat(r.cancelledByClient() + r.completed()).as(fault + " " + r.reasons()).isEqualTo(r.requests());
            assertThat(r.completed()).isGreaterThanOrEqualTo(4);
        }
    }
}
