package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.observe.Handover.Stage;
import org.junit.jupiter.api.Test;

/** serve-bench's handover table: each stage from the one before it, over the requests that reached both. */
class HandoverLogTest {
    private static final long MS = 1_000_000;

    /** A request marked at every stage, {@code gapMs} after the one before, starting at {@code startMs}. */
    private static void request(HandoverLog log, String id, long startMs, long gapMs) {
        long at = startMs * MS;
        for (Stage stage : Stage.values()) {
            log.reached(id, stage, at);
            at += gapMs * MS;
        }
    }

    @Test
    void eachStageIsTimedFromTheOneBeforeItWithNearestRankPercentiles() {
        HandoverLog log = new HandoverLog();
        for (int i = 1; i <= 100; i++) {
            request(log, "r-" + i, 1_000L * i, i);   // request i spends i ms in every stage
        }
        HandoverLog.Figures f = log.figures();

        assertThat(f.stages()).as("every stage but prefill's answer, from the one before").hasSize(Stage.values().length - 2);
        HandoverLog.Span first = f.stages().getFirst();
        assertThat(first.from()).isEqualTo("proxy_in");
        assertThat(first.to()).isEqualTo("prefill_admitted");
        assertThat(first.n()).isEqualTo(100);
        assertThat(first.p50Ms()).isEqualTo(50.0);
        assertThat(first.p99Ms()).isEqualTo(99.0);
        // last_layer_ready (index 5) to first_token_out (index 10): five stages
        assertThat(f.handover().p50Ms()).isEqualTo(250.0);
        assertThat(f.afterCopy().p50Ms()).as("last_copy_ended (index 6) to first_token_out").isEqualTo(200.0);
        assertThat(f.clientFirstByte().p99Ms()).isEqualTo(11 * 99.0);
        assertThat(f.prefillAnswered().p50Ms()).isEqualTo(4 * 50.0);
        assertThat(f.afterPrefillAnswer().p50Ms()).isEqualTo(7 * 50.0);
        assertThat(f.stages().get(1).to()).isEqualTo("forward_started");
        assertThat(f.stages().get(2).to()).isEqualTo("block_list_received");
        HandoverLog.Span intoLastLayer = f.stages().get(3);
        assertThat(intoLastLayer.from()).as("prefill's answer left out of the chain").isEqualTo("block_list_received");
        assertThat(intoLastLayer.to()).isEqualTo("last_layer_ready");
        assertThat(intoLastLayer.p50Ms()).isEqualTo(2 * 50.0);
    }

    @Test
    void aRequestMissingAStageCountsOnlyWhereItHasBothEnds() {
        HandoverLog log = new HandoverLog();
        request(log, "whole", 0, 2);
        log.reached("failed", Stage.PROXY_IN, 0);
        log.reached("failed", Stage.PREFILL_ADMITTED, 7 * MS);
        log.reached("failed", Stage.PREFILL_ADMITTED, 9 * MS);   // a repeat keeps the first mark

        HandoverLog.Figures f = log.figures();
        assertThat(f.stages().getFirst().n()).isEqualTo(2);
        assertThat(f.stages().getFirst().p99Ms()).isEqualTo(7.0);
        assertThat(f.stages().get(1).n()).isEqualTo(1);
        assertThat(f.handover().n()).isEqualTo(1);
        assertThat(HandoverLog.table(f)).contains("proxy_in", "client_first_byte").contains("= last_layer_ready");
    }

    @Test
    void anEmptyLogHasNoPercentiles() {
        HandoverLog.Figures f = new HandoverLog().figures();
        assertThat(f.handover().n()).isZero();
        assertThat(f.handover().p50Ms()).isNaN();
        assertThat(HandoverLog.table(f)).contains(" - ");
    }
}
