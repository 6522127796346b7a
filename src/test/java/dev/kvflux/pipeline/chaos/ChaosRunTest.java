package dev.kvflux.pipeline.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * The fault matrix at a small count, one fault per test, against real prefill and decode processes: every
 * fault leaves no request unfinished or failed without a reason, nothing held on either side, no corrupt
 * output, and requests succeed after it. The full count runs through {@code kvflux chaos}.
 */
class ChaosRunTest {
    static final List<String> FAULTS = ChaosRun.FAULTS;

    @ParameterizedTest(name = "{0}")
    @FieldSource("FAULTS")
    void everyRequestEndsWithAReasonAndNothingStaysHeld(String fault, @TempDir Path logs) throws Exception {
        ChaosRun.FaultResult r = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                List.of(fault), logs)).run(line -> { }).getFirst();

        assertThat(r.fault()).isEqualTo(fault);
        assertThat(r.requests()).isEqualTo(6);
        assertThat(r.neverFinished()).as("never finished").isZero();
        assertThat(r.failedWithoutReason()).as("failed without a reason " + r.reasons()).isZero();
        assertThat(r.leakedBlocks()).as("leaked blocks").isZero();
        assertThat(r.leakedHandles()).as("leaked handles").isZero();
        assertThat(r.corruptOutputs()).as("corrupt outputs").isZero();
        assertThat(r.completed()).as("completed some").isPositive();
        assertThat(r.recoverySeconds()).as("recovered").isNotNegative();
        if (fault.equals("validation-rejects")) {
            assertThat(r.failedCleanly()).isEqualTo(2);
        }
        if (fault.startsWith("status-") || fault.equals("burst")) {
            assertThat(r.failedCleanly()).as("the injected fault failed some requests").isPositive();
        }
        if (fault.equals("client-disconnect")) {
            assertThat(r.cancelledByClient()).isEqualTo(2);
        }
    }
}
