package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.Predicate;
import java.util.stream.IntStream;
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
    private static final ChaosRun.Settings SETTINGS = new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
            List.of(), Path.of("unused"));

    /** The faults that share one prefill and decode, those whose prefill takes options of its own, and a status failure per code. */
    static final List<List<String>> GROUPS = List.of(
            labels(f -> f.prefillArgs(SETTINGS).isEmpty()),
            labels(f -> f instanceof ChaosFault.Fixed && !f.prefillArgs(SETTINGS).isEmpty()),
            labels(f -> f instanceof ChaosFault.StatusFailure));

    private static List<String> labels(Predicate<ChaosFault> which) {
        return ChaosFault.all().stream().filter(which).map(ChaosFault::label).toList();
    }

    @Test
    void thereIsAStatusFailureForEveryFailureCode() {
        assertThat(ChaosFault.all().stream().filter(ChaosFault.StatusFailure.class::isInstance)
                .map(f -> ((ChaosFault.StatusFailure) f).code())).containsExactlyInAnyOrderElementsOf(
                java.util.Arrays.stream(StatusCode.values()).filter(StatusCode::isFailure).toList());
    }

    @Test
    void theGroupsCoverEveryFault() {
        assertThat(GROUPS.stream().flatMap(List::stream)).containsExactlyInAnyOrderElementsOf(ChaosRun.FAULTS);
    }

    @Test
    void theFaultsRunInTheirDocumentedOrderUnderTheirNames() {
        assertThat(ChaosRun.FAULTS.subList(0, 6)).containsExactly("decode-restart", "prefill-kill", "prefill-sigterm",
                "client-disconnect", "validation-rejects", "burst");
        assertThat(ChaosRun.FAULTS.get(6)).startsWith("status-fail-");
        assertThat(ChaosRun.FAULTS.subList(ChaosRun.FAULTS.size() - 7, ChaosRun.FAULTS.size())).containsExactly(
                "status-stall", "status-slow", "sg-under-load", "notify-loss", "notify-duplicate", "notify-delay",
                "notify-reorder");
        assertThat(ChaosFault.named("status-fail-invalid-args")).isEqualTo(
                new ChaosFault.StatusFailure(StatusCode.ERR_INVALID_ARGS));
    }

    @Test
    void anUnknownFaultIsRefusedNamingEveryFault() {
        assertThatThrownBy(() -> new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2, List.of("meteor"),
                Path.of("unused"))).hasMessageStartingWith("unknown fault 'meteor'; expected one of [decode-restart, ");
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
        ChaosFault chaosFault = ChaosFault.named(fault);
        switch (chaosFault.expectation()) {
            case NONE -> { }
            case SOME_FAIL_CLEANLY ->
                    assertThat(r.failedCleanly()).as(fault + ": the injected fault failed some requests").isPositive();
            case ALL_COMPLETE -> {
                assertThat(r.completed()).as(fault + ": late copies and swapped notifications still complete "
                        + r.reasons()).isEqualTo(r.requests());
                assertThat(r.failedCleanly()).as(fault + " failed none").isZero();
            }
            case INVALID_FAIL_CLEANLY -> assertThat(r.failedCleanly()).as(fault + ": the invalid requests were rejected")
                    .isEqualTo(count(chaosFault, ChaosFault.Request.INVALID, r.requests()));
            case OTHERS_COMPLETE -> {
                // the clients that hang up do so 1-30 ms in; one whose answer came sooner counts as completed
                assertThat(r.cancelledByClient() + r.completed()).as(fault + " " + r.reasons()).isEqualTo(r.requests());
                assertThat(r.completed()).isGreaterThanOrEqualTo(count(chaosFault, ChaosFault.Request.NORMAL,
                        r.requests()));
            }
        }
    }

    private static int count(ChaosFault fault, ChaosFault.Request kind, int requests) {
        return (int) IntStream.range(0, requests).filter(i -> fault.request(i) == kind).count();
    }
}
