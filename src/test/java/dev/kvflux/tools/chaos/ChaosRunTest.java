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
// real processes (role JVMs, etcd, a Python proxy) start and stop in each test, which takes minutes on a loaded
// 2-core host; the claims are about what ended how, not how soon, so the bound is only a guard against a hang
@org.junit.jupiter.api.Timeout(value = 5, unit = java.util.concurrent.TimeUnit.MINUTES)
class ChaosRunTest {
    private static final ChaosRun.Settings SETTINGS = new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
            List.of(), Path.of("unused"));

    /** The faults that share one prefill and decode, those whose prefill takes options of its own, and a status failure per code. */
    static final List<List<String>> GROUPS = List.of(
            labels(f -> f instanceof ChaosFault.Fixed && f.prefillArgs(SETTINGS).isEmpty()),
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

    /** The faults on etcd, run on a cluster of their own (a real etcd, a prefill, two decodes, two proxies). */
    static final List<String> ON_ETCD = labels(ChaosFault.Membership.class::isInstance);

    @Test
    void theGroupsCoverEveryFault() {
        assertThat(java.util.stream.Stream.concat(GROUPS.stream().flatMap(List::stream), ON_ETCD.stream()))
                .containsExactlyInAnyOrderElementsOf(ChaosRun.FAULTS);
    }

    @Test
    void theFaultsRunInTheirDocumentedOrderUnderTheirNames() {
        assertThat(ChaosRun.FAULTS.subList(0, 6)).containsExactly("decode-restart", "prefill-kill", "prefill-sigterm",
                "client-disconnect", "validation-rejects", "burst");
        assertThat(ChaosRun.FAULTS.get(6)).startsWith("status-fail-");
        assertThat(ChaosRun.FAULTS.subList(ChaosRun.FAULTS.size() - 11, ChaosRun.FAULTS.size())).containsExactly(
                "status-stall", "status-slow", "sg-under-load", "notify-loss", "notify-duplicate", "notify-delay",
                "notify-reorder", "proxy-kill", "etcd-restart", "instance-pause", "blackhole-instance");
        assertThat(ChaosRun.MEMBERSHIP_FAULTS).isEqualTo(ON_ETCD);
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

    /**
     * The roles over the C simulator, decode's KV in shared memory that prefill's process maps, every block checked:
     * a killed decode or prefill, a lost notification and a failing copy leave nothing held, no handle, session or
     * mapping beyond what the roles keep at rest, and no corrupt output.
     */
    @Test
    void theRolesOverTheCSimulatorLeaveNothingHeldThroughKillsLossesAndFailedCopies(@TempDir Path logs)
            throws Exception {
        List<String> faults = List.of("decode-restart", "prefill-kill", "notify-loss", "status-fail-gpu-op");
        List<ChaosRun.FaultResult> results = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                faults, logs, "native-sim", dev.kvflux.transfer.KvMode.WRITE)).run(line -> { });

        assertThat(results).extracting(ChaosRun.FaultResult::fault).containsExactlyElementsOf(faults);
        results.forEach(ChaosRunTest::check);
    }

    /**
     * READ mode, decode pulling each layer from prefill over the C simulator's shared memory: decode killed while it
     * reads, prefill killed holding blocks decode reads from, a lost notice, and a read failing at one layer (the
     * injected fault strikes decode's reads) leave nothing held on either side and no corrupt output.
     */
    @Test
    void inReadModeKillsLossesAndFailedReadsLeaveNothingHeld(@TempDir Path logs) throws Exception {
        List<String> faults = List.of("decode-restart", "prefill-kill", "notify-loss", "status-fail-rdma-op");
        List<ChaosRun.FaultResult> results = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                faults, logs, "native-sim", dev.kvflux.transfer.KvMode.READ)).run(line -> { });

        assertThat(results).extracting(ChaosRun.FaultResult::fault).containsExactlyElementsOf(faults);
        results.forEach(ChaosRunTest::check);
        assertThat(results.get(3).reasons()).as("the read failure reached the client with its code")
                .containsKey("503 ERR_RDMA_OP");
    }

    /**
     * The faults on etcd: a proxy killed and restarted routes again at once while the other answers everything, etcd
     * restarted fails nothing, a paused decode is dropped and comes back, a blackhole is ejected by both proxies.
     */
    @Test
    void theFaultsOnEtcdLeaveNoRequestUnfinishedAndNothingHeld(@TempDir Path logs) throws Exception {
        List<ChaosRun.FaultResult> results = new ChaosRun(new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2,
                ON_ETCD, logs)).run(line -> { });

        assertThat(results).extracting(ChaosRun.FaultResult::fault).containsExactlyElementsOf(ON_ETCD);
        results.forEach(ChaosRunTest::check);
        ChaosRun.FaultResult kill = results.get(0);
        assertThat(kill.figures()).containsKeys("restart_to_healthy_s", "healthy_to_first_routed_s");
        assertThat(kill.figures().get("completed_via_proxy_1")).as("the other proxy answered every request")
                .isEqualTo(kill.figures().get("requests_via_proxy_1"));
        assertThat(results.get(1).figures()).containsKeys("kill_to_both_report_down_s", "serving_to_both_connected_s");
        assertThat(results.get(2).figures().get("pause_to_dropped_by_both_s")).as("dropped when its lease ended")
                .isGreaterThanOrEqualTo(1.0);
        assertThat(results.get(3).figures()).containsKey("registered_to_ejected_by_both_s");
    }

    private static void check(ChaosRun.FaultResult r) {
        String fault = r.fault();
        assertThat(r.violations()).as(fault + ": the verdict kvflux chaos prints").isEmpty();
        assertThat(r.requests()).as(fault).isEqualTo(6);
        assertThat(r.neverFinished()).as(fault + " never finished").isZero();
        if (ChaosFault.named(fault).expectation() == ChaosFault.Expectation.CUT_WITH_THE_PROXY) {
            assertThat(r.failedWithoutReason()).as(fault + ": only requests in flight on the killed proxy are cut "
                    + r.reasons()).isLessThanOrEqualTo(3);
        } else {
            assertThat(r.failedWithoutReason()).as(fault + " failed without a reason " + r.reasons()).isZero();
        }
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
            case CUT_WITH_THE_PROXY -> assertThat(r.completed() + r.failedWithoutReason()).as(fault + " " + r.reasons())
                    .isEqualTo(r.requests());
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
