package dev.kvflux.tools.chaos.history;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.tools.chaos.history.Violation.Rule;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** The history checker on histories built by hand: a correct one passes, and each rule's break is found and named. */
class HistoryCheckTest {
    private static final long DECODE = 7001;
    private static final long PREFILL = 5001;
    private static final String DECODE_AT = "10.0.0.2:7000";
    private static final String PREFILL_AT = "10.0.0.1:6000";

    /** A run's events, each a microsecond after the one before. */
    private static final class Run {
        final List<HistoryEvent> events = new ArrayList<>();
        long clock = 1_000;

        Run() {
            add(HistoryEvent.side(0, "decode", "started", "", DECODE).detail(DECODE_AT));
            add(HistoryEvent.side(0, "prefill", "started", "", PREFILL).detail(PREFILL_AT));
        }

        HistoryEvent add(HistoryEvent e) {
            HistoryEvent stamped = new HistoryEvent(clock++, e.role(), e.kind(), e.transfer(), e.incarnation(),
                    e.message(), e.from(), e.to(), e.blocks(), e.detail(), e.index(), e.source());
            events.add(stamped);
            return stamped;
        }

        Run decode(String kind, String t) {
            add(HistoryEvent.side(0, "decode", kind, t, DECODE));
            return this;
        }

        Run decode(String kind, String t, UnaryOperator<HistoryEvent> more) {
            add(more.apply(HistoryEvent.side(0, "decode", kind, t, DECODE)));
            return this;
        }

        Run prefill(String kind, String t) {
            return prefill(kind, t, PREFILL, e -> e);
        }

        Run prefill(String kind, String t, long incarnation, UnaryOperator<HistoryEvent> more) {
            add(more.apply(HistoryEvent.side(0, "prefill", kind, t, incarnation)));
            return this;
        }

        Run client(int index, String t, String outcome) {
            add(HistoryEvent.outcome(0, index, t, outcome));
            return this;
        }

        /** A request as it should go, from decode opening it to decode freeing its blocks. */
        Run opened(String t, List<Long> blocks) {
            return decode("opened", t, e -> e.blocks(blocks).detail(PREFILL_AT))
                    .decode("sent", t, e -> e.message("remote_blocks", DECODE, 0).blocks(blocks))
                    .prefill("opened", t, PREFILL, e -> e.detail(DECODE_AT))
                    .prefill("received", t, PREFILL, e -> e.message("remote_blocks", DECODE, 0).blocks(blocks));
        }

        Run posted(String t, List<Long> blocks) {
            return prefill("write_posted", t, PREFILL, e -> e.blocks(blocks).to(DECODE));
        }

        /** Prefill sends {@code message} about decode incarnation {@code to}, and decode takes it. */
        Run notice(String message, String t, long to) {
            return prefill("sent", t, PREFILL, e -> e.message(message, PREFILL, DECODE))
                    .decode("received", t, e -> e.message(message, PREFILL, to));
        }

        Run written(String t, List<Long> blocks) {
            return posted(t, blocks).notice("write_done", t, DECODE).decode("kv_ready", t, e -> e.detail("write_done"));
        }

        Run settled(String t, List<Long> blocks) {
            return prefill("writes_ended", t, PREFILL, e -> e.detail("drained"))
                    .prefill("sent", t, PREFILL, e -> e.message("release", PREFILL, DECODE))
                    .prefill("ended", t)
                    .decode("received", t, e -> e.message("release", PREFILL, DECODE))
                    .decode("ended", t)
                    .decode("freed", t, e -> e.blocks(blocks));
        }

        Run good(int index, String t, List<Long> blocks) {
            return opened(t, blocks).written(t, blocks).decode("uses_kv", t).settled(t, blocks)
                    .client(index, t, "COMPLETED 200");
        }

        HistoryCheck.Result check() {
            return HistoryCheck.check(History.of(events));
        }
    }

    @Test
    void aCorrectHistoryPasses() {
        HistoryCheck.Result result = new Run().good(0, "t0", List.of(1L, 2L)).good(1, "t1", List.of(1L, 2L))
                .good(2, "t2", List.of(3L)).check();

        assertThat(result.violations()).isEmpty();
        assertThat(result.clean()).isTrue();
        assertThat(result.report()).startsWith("history check: ")
                .contains("(a) every request ended exactly once, for the client and on each side: 0")
                .contains("(d) no write_done was accepted from a stale incarnation: 0");
    }

    @Test
    void aFailedRequestThatEndedOnceOnEverySidePasses() {
        Run run = new Run().opened("t0", List.of(1L))
                .posted("t0", List.of(1L)).notice("write_failed", "t0", DECODE)
                .decode("kv_failed", "t0", e -> e.detail("write_failed"))
                .settled("t0", List.of(1L)).client(0, "t0", "FAILED_CLEANLY 503 kv_transfer_failed");

        assertThat(run.check().violations()).isEmpty();
    }

    private static Violation only(HistoryCheck.Result result, Rule rule) {
        assertThat(result.violations()).as(result.report()).allMatch(v -> v.rule() == rule).hasSize(1);
        assertThat(result.count(rule)).isEqualTo(1);
        return result.violations().getFirst();
    }

    @Test
    void aTransferThatEndedTwiceOnASideBreaksRuleA() {
        Run run = new Run().good(0, "t0", List.of(1L)).good(1, "t1", List.of(2L)).decode("ended", "t1");

        Violation v = only(run.check(), Rule.ENDED_ONCE);

        assertThat(v.what()).isEqualTo("t1 on decode#7001 ended 2 times");
        assertThat(v.transfers()).containsExactly("t1");
    }

    @Test
    void aTransferThatNeverEndedOnARunningSideBreaksRuleA() {
        Run run = new Run().good(0, "t0", List.of(1L)).opened("t1", List.of(2L)).written("t1", List.of(2L))
                .decode("uses_kv", "t1").prefill("writes_ended", "t1").prefill("ended", "t1")
                .client(1, "t1", "COMPLETED 200");

        Violation v = only(run.check(), Rule.ENDED_ONCE);

        assertThat(v.what()).isEqualTo("t1 on decode#7001 never ended");
    }

    @Test
    void aSideKilledAndRestartedAtItsAddressIsExcusedWhatItNeverEnded() {
        Run run = new Run().opened("t0", List.of(1L)).client(0, "t0", "FAILED_CLEANLY 503 prefill_restarted");
        run.add(HistoryEvent.side(0, "prefill", "started", "", PREFILL + 1).detail(PREFILL_AT));
        run.decode("kv_failed", "t0", e -> e.detail("prefill_restarted")).decode("ended", "t0")
                .decode("freed", "t0", e -> e.blocks(List.of(1L)));

        assertThat(run.check().violations()).isEmpty();
    }

    @Test
    void aClientRequestWithTwoOutcomesOrNoneBreaksRuleA() {
        Run run = new Run().good(0, "t0", List.of(1L)).client(0, "t0", "CANCELLED client went away")
                .good(2, "t2", List.of(1L));

        HistoryCheck.Result result = run.check();

        assertThat(result.violations()).extracting(Violation::rule).containsOnly(Rule.ENDED_ONCE);
        assertThat(result.violations()).extracting(Violation::what).containsExactly(
                "the client saw 2 outcomes for request 0 (client)", "the client has no outcome for request 1 (client)");
        assertThat(result.violations().getFirst().transfers()).containsExactly("t0");
        assertThat(result.violations().get(1).clientIndex()).isEqualTo(1);
    }

    @Test
    void aBlockHandedToANewTransferWhileAnOldWriteCouldLandBreaksRuleB() {
        // t0's blocks are freed (the lease) while prefill's write into them is still in flight, and t1 gets block 1
        Run run = new Run().opened("t0", List.of(1L, 2L))
                .prefill("write_posted", "t0", PREFILL, e -> e.blocks(List.of(1L, 2L)).to(DECODE))
                .decode("kv_failed", "t0", e -> e.detail("deadline")).decode("sent", "t0",
                        e -> e.message("abort", DECODE, 0))
                .decode("ended", "t0").decode("freed", "t0", e -> e.blocks(List.of(1L, 2L)))
                .client(0, "t0", "FAILED_CLEANLY 504 RECEIVE_DEADLINE")
                .good(1, "t1", List.of(1L, 5L))
                .prefill("writes_ended", "t0", PREFILL, e -> e.detail("drained")).prefill("aborted", "t0")
                .prefill("ended", "t0");

        Violation v = only(run.check(), Rule.NO_WRITE_INTO_REUSED_BLOCK);

        assertThat(v.transfers()).containsExactly("t0", "t1");
        assertThat(v.what()).startsWith("prefill#5001's write of t0 into decode#7001's blocks [1] could land from")
                .contains("while t1 held them from");
    }

    @Test
    void aWriteThatNeverEndedOnARunningPrefillCouldLandForeverAndBreaksRuleB() {
        Run run = new Run().opened("t0", List.of(4L))
                .prefill("write_posted", "t0", PREFILL, e -> e.blocks(List.of(4L)).to(DECODE))
                .decode("kv_failed", "t0", e -> e.detail("deadline")).decode("ended", "t0")
                .decode("freed", "t0", e -> e.blocks(List.of(4L))).client(0, "t0", "FAILED_CLEANLY 504")
                .good(1, "t1", List.of(4L)).prefill("ended", "t0");

        Violation v = only(run.check(), Rule.NO_WRITE_INTO_REUSED_BLOCK);

        assertThat(v.what()).contains("until never said");
    }

    @Test
    void aWriteIntoAnotherDecodeIncarnationsBlocksDoesNotCount() {
        Run run = new Run().good(0, "t0", List.of(1L)).prefill("opened", "old")
                .prefill("write_posted", "old", PREFILL, e -> e.blocks(List.of(1L)).to(DECODE - 1))
                .prefill("ended", "old");

        assertThat(run.check().violations()).isEmpty();
    }

    @Test
    void decodingAfterTheWaitForTheKvFailedBreaksRuleC() {
        Run run = new Run().opened("t0", List.of(1L))
                .decode("kv_failed", "t0", e -> e.detail("deadline")).decode("uses_kv", "t0")
                .prefill("aborted", "t0").prefill("ended", "t0").decode("ended", "t0")
                .client(0, "t0", "COMPLETED 200");

        Violation v = only(run.check(), Rule.NO_DECODE_FROM_FAILED_KV);

        assertThat(v.what()).isEqualTo("decode#7001 decoded t0 from its KV, but its wait for the KV failed (deadline)");
        assertThat(v.transfers()).containsExactly("t0");
    }

    @Test
    void decodingKvThatPrefillHadAbortedBreaksRuleC() {
        Run run = new Run().opened("t0", List.of(1L))
                .posted("t0", List.of(1L)).prefill("aborted", "t0", PREFILL, e -> e.detail("decode restarted"))
                .notice("write_done", "t0", DECODE)
                .decode("kv_ready", "t0").decode("uses_kv", "t0").settled("t0", List.of(1L))
                .client(0, "t0", "COMPLETED 200");

        Violation v = only(run.check(), Rule.NO_DECODE_FROM_FAILED_KV);

        assertThat(v.what()).endsWith("but prefill#5001 had aborted it (decode restarted)");
    }

    @Test
    void decodingKvOfATransferPrefillFencedOrFailedBreaksRuleC() {
        // prefill fenced t0 (an abort came first) and never wrote it, yet a write_done for it was taken
        Run fenced = new Run().decode("opened", "t0", e -> e.blocks(List.of(1L)).detail(PREFILL_AT))
                .decode("received", "t0", e -> e.message("write_done", PREFILL, DECODE))
                .decode("kv_ready", "t0").decode("uses_kv", "t0").decode("ended", "t0")
                .client(0, "t0", "COMPLETED 200");
        Run failed = new Run().opened("t0", List.of(1L))
                .prefill("sent", "t0", PREFILL, e -> e.message("write_failed", PREFILL, DECODE))
                .notice("write_done", "t0", DECODE)
                .decode("kv_ready", "t0").decode("uses_kv", "t0").settled("t0", List.of(1L))
                .client(0, "t0", "COMPLETED 200");

        assertThat(only(fenced.check(), Rule.NO_DECODE_FROM_FAILED_KV).what())
                .endsWith("but prefill#5001 never sent it write_done (fenced or not written)");
        assertThat(only(failed.check(), Rule.NO_DECODE_FROM_FAILED_KV).what())
                .endsWith("but prefill#5001 said write_failed for it");
    }

    @Test
    void decodingWithoutAWriteDoneOrAfterTellingPrefillAbortBreaksRuleC() {
        Run noWriteDone = new Run().opened("t0", List.of(1L)).decode("kv_ready", "t0").decode("uses_kv", "t0")
                .decode("ended", "t0").prefill("ended", "t0").client(0, "t0", "COMPLETED 200");
        Run afterAbort = new Run().opened("t0", List.of(1L)).written("t0", List.of(1L))
                .decode("sent", "t0", e -> e.message("abort", DECODE, 0)).decode("uses_kv", "t0")
                .settled("t0", List.of(1L)).client(0, "t0", "COMPLETED 200");

        assertThat(only(noWriteDone.check(), Rule.NO_DECODE_FROM_FAILED_KV).what())
                .endsWith("but it took no write_done for it");
        assertThat(only(afterAbort.check(), Rule.NO_DECODE_FROM_FAILED_KV).what())
                .endsWith("but it had told prefill abort");
    }

    @Test
    void aWriteDoneTakenForAnotherDecodeIncarnationBreaksRuleD() {
        Run run = new Run().opened("t0", List.of(1L))
                .posted("t0", List.of(1L)).notice("write_done", "t0", DECODE - 1)
                .decode("kv_ready", "t0").settled("t0", List.of(1L)).client(0, "t0", "FAILED_CLEANLY 503");

        Violation v = only(run.check(), Rule.NO_STALE_WRITE_DONE);

        assertThat(v.what()).isEqualTo("decode#7001 took write_done for t0 about the blocks of decode incarnation 7000");
        assertThat(v.transfers()).containsExactly("t0");
    }

    @Test
    void aWriteDoneTakenFromAnOlderPrefillIncarnationBreaksRuleD() {
        long newer = PREFILL + 1;
        Run run = new Run();
        run.add(HistoryEvent.side(0, "prefill", "started", "", newer).detail(PREFILL_AT));
        // decode hears from the newer prefill about t1, then takes the old one's write_done for t0
        run.opened("t0", List.of(1L)).decode("opened", "t1", e -> e.blocks(List.of(2L)).detail(PREFILL_AT))
                .decode("received", "t1", e -> e.message("write_failed", newer, DECODE))
                .decode("kv_failed", "t1", e -> e.detail("write_failed")).decode("ended", "t1")
                .decode("received", "t0", e -> e.message("write_done", PREFILL, DECODE))
                .decode("kv_ready", "t0").decode("ended", "t0").client(0, "t0", "FAILED_CLEANLY 503")
                .client(1, "t1", "FAILED_CLEANLY 503");

        Violation v = only(run.check(), Rule.NO_STALE_WRITE_DONE);

        assertThat(v.what()).isEqualTo("decode#7001 took write_done for t0 from prefill incarnation 5001 at "
                + PREFILL_AT + " after it had heard from the newer 5002");
    }

    @Test
    void aNewerPrefillHeardOfOnlyAboutAnotherDecodesBlocksMakesNoWriteDoneStale() {
        // decode dropped the newer prefill's message before reading its incarnation: it learned nothing from it
        Run run = new Run().opened("t0", List.of(1L)).decode("opened", "t1", e -> e.blocks(List.of(2L))
                        .detail(PREFILL_AT))
                .decode("dropped", "t1", e -> e.message("write_failed", PREFILL + 1, DECODE - 1))
                .decode("kv_failed", "t1", e -> e.detail("deadline")).decode("ended", "t1")
                .written("t0", List.of(1L)).decode("uses_kv", "t0").settled("t0", List.of(1L))
                .client(0, "t0", "COMPLETED 200").client(1, "t1", "FAILED_CLEANLY 504");

        assertThat(run.check().violations()).isEmpty();
    }

    @Test
    void aWriteDoneThatWasNotTakenIsNoBreak() {
        // dropped by the fence: recorded as dropped, and the wait failed
        Run run = new Run().opened("t0", List.of(1L))
                .decode("dropped", "t0", e -> e.message("write_done", PREFILL, DECODE - 1))
                .decode("kv_failed", "t0", e -> e.detail("deadline")).decode("ended", "t0").prefill("ended", "t0")
                .client(0, "t0", "FAILED_CLEANLY 504");

        assertThat(run.check().violations()).isEmpty();
    }

    @Test
    void theReportCountsEachRuleAndPrintsTheHistoriesOfTheRequestsThatBreakIt() {
        Run run = new Run().opened("t0", List.of(1L)).decode("kv_failed", "t0", e -> e.detail("deadline"))
                .decode("uses_kv", "t0").decode("ended", "t0").prefill("ended", "t0").client(0, "t0", "COMPLETED 200");

        String report = run.check().report();

        assertThat(report).contains("(c) no decode used KV of a transfer that was aborted, fenced or failed: 1")
                .contains("(c) decode#7001 decoded t0 from its KV, but its wait for the KV failed (deadline)")
                .contains("  history of transfer t0:\n    1002 decode#7001 opened blocks [1] (" + PREFILL_AT + ")")
                .contains("decode#7001 uses_kv").contains("client outcome request 0 (COMPLETED 200)")
                .contains("(e) membership converged in both proxies after healing: not checked");
    }

    @Test
    void theReportShowsAtMostFiveBreaksOfARule() {
        Run run = new Run();
        for (int i = 0; i < 8; i++) {
            run.good(i, "t" + i, List.of((long) i)).decode("ended", "t" + i);
        }

        HistoryCheck.Result result = run.check();

        assertThat(result.count(Rule.ENDED_ONCE)).isEqualTo(8);
        assertThat(result.report()).contains("(a) and 3 more").containsOnlyOnce("history of transfer t4:")
                .doesNotContain("history of transfer t5:");
    }

    @Test
    void aLongRunWhoseRequestsAllReuseTheSameBlocksChecksCleanAndFindsTheOneReuseUnderAWrite() {
        // the allocator hands the same blocks to request after request: each block's holders form a long line
        Run run = new Run();
        for (int i = 0; i < 20_000; i++) {
            run.good(i, "t" + i, List.of(1L, 2L, 3L, 4L));
        }
        assertThat(run.check().violations()).isEmpty();

        run.opened("late", List.of(9L)).posted("late", List.of(2L)).decode("kv_failed", "late")
                .decode("ended", "late").prefill("ended", "late").client(20_000, "late", "FAILED_CLEANLY 504")
                .good(20_001, "next", List.of(2L)).prefill("writes_ended", "late");

        Violation v = only(run.check(), Rule.NO_WRITE_INTO_REUSED_BLOCK);
        assertThat(v.transfers()).containsExactly("late", "next");
    }

    @Test
    void onlyRequestsFromTheChecksStartAreJudged() {
        Run run = new Run().good(0, "t0", List.of(1L)).decode("ended", "t0");
        long since = run.clock;
        run.good(1, "t1", List.of(2L));

        HistoryCheck.Result all = HistoryCheck.check(History.of(run.events));
        HistoryCheck.Result fromT1 = HistoryCheck.check(History.of(run.events), since, null);

        assertThat(all.count(Rule.ENDED_ONCE)).isEqualTo(1);
        assertThat(fromT1.violations()).isEmpty();
    }
}
