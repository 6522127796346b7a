package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Prefill and decode of several ranks each, end to end through the proxy, in both modes. */
class ServeBenchRanksTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 2, Duration.ofMillis(2), 64,
            1152);

    private static ServeBench.Settings settings(String backend, List<TpRanks> pairs) {
        return new ServeBench.Settings(List.of(Policy.KVFLUX), List.of(2), List.of(6), 200, 2, Duration.ofSeconds(3),
                null, false, FaultPlan.NONE, SMALL, Duration.ofSeconds(30), 0, 0, null,
                new ServeBench.Roles(backend, false, 256, 0, null), List.of(KvMode.WRITE, KvMode.READ), pairs);
    }

    private static List<BenchRow> run(ServeBench.Settings settings) {
        return new ServeBench(settings, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8))
                .run();
    }

    @Test
    void everyRequestIsServedOverTwoPrefillRanksAndFourDecodeRanksAndTheReverseInBothModes() {
        List<BenchRow> rows = run(settings("sim-xgmi", List.of(new TpRanks(2, 4), new TpRanks(4, 2))));

        assertThat(rows).extracting(BenchRow::tp).containsExactly(new TpRanks(2, 4), new TpRanks(2, 4),
                new TpRanks(4, 2), new TpRanks(4, 2));
        assertThat(rows).extracting(BenchRow::kvMode).containsExactly(KvMode.WRITE, KvMode.READ, KvMode.WRITE,
                KvMode.READ);
        assertThat(rows).allSatisfy(row -> {
            assertThat(row.load().completed()).as(row.tp() + " " + row.kvMode()).isEqualTo(6);
            assertThat(row.load().neverFinished()).isZero();
        });
    }
}
