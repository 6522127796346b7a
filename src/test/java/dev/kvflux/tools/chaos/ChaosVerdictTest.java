package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The verdict kvflux chaos prints and exits on: what every fault must keep, and what each promises beyond it. */
class ChaosVerdictTest {
    private static ChaosRun.FaultResult result(String fault, int completed, int failedCleanly, int neverFinished,
            long leakedBlocks, int failedWithoutReason, Map<String, Integer> reasons) {
        return new ChaosRun.FaultResult(fault, 200, completed, failedCleanly, neverFinished, leakedBlocks, 0, 0, 0.1,
                failedWithoutReason, 0, reasons, Map.of());
    }

    @Test
    void aRestartWhoseFailuresAllCarriedAReasonIsClean() {
        assertThat(result("decode-restart", 125, 75, 0, 0, 0, Map.of("502 decode_unreachable", 75)).violations())
                .isEmpty();
    }

    @Test
    void reorderedNotificationsThatFailedRequestsBreakThatFaultsPromise() {
        assertThat(result("notify-reorder", 129, 71, 0, 0, 0, Map.of("503 no_prefill", 71)).violations())
                .singleElement().asString().contains("only 129 of 200 completed").contains("503 no_prefill");
    }

    @Test
    void aRequestThatNeverFinishedOrABlockLeftHeldBreaksAnyFault() {
        assertThat(result("burst", 150, 49, 1, 8, 0, Map.of()).violations())
                .containsExactly("1 requests never finished", "8 blocks and 0 handles still held");
    }

    @Test
    void historyViolationsOrAHistoryThatCouldNotBeCheckedBreakAnyFault() {
        ChaosRun.FaultResult clean = result("decode-restart", 125, 75, 0, 0, 0, Map.of("502 decode_unreachable", 75));
        ChaosRun.FaultResult broken = withHistory(clean, 3);
        ChaosRun.FaultResult unread = withHistory(clean, -1);

        assertThat(withHistory(clean, 0).violations()).isEmpty();
        assertThat(broken.violations()).containsExactly("3 history violations (see decode-restart-history-check.txt)");
        assertThat(unread.violations()).containsExactly("its history could not be checked (see"
                + " decode-restart-history-check.txt)");
    }

    private static ChaosRun.FaultResult withHistory(ChaosRun.FaultResult r, double violations) {
        return new ChaosRun.FaultResult(r.fault(), r.requests(), r.completed(), r.failedCleanly(), r.neverFinished(),
                r.leakedBlocks(), r.leakedHandles(), r.corruptOutputs(), r.recoverySeconds(), r.failedWithoutReason(),
                r.cancelledByClient(), r.reasons(), Map.of(dev.kvflux.tools.chaos.history.HistoryCheck.FIGURE,
                        violations));
    }

    @Test
    void requestsCutWithAKilledProxyNeedNoReasonButOthersDo() {
        assertThat(result("proxy-kill", 193, 0, 0, 0, 7, Map.of()).violations()).isEmpty();
        assertThat(result("decode-restart", 125, 74, 0, 0, 1, Map.of()).violations())
                .containsExactly("1 requests failed without a reason");
    }
}
