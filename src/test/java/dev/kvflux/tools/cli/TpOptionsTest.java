package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.transfer.TpRanks;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The tensor-parallel options: {@code --tp} and {@code --peer-tp} on the roles, the pairs of serve-bench. */
class TpOptionsTest {
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return KvfluxCli.commandLine().setErr(new PrintWriter(err, true)).execute(args);
    }

    @Test
    void aRoleTpSizeThatIsNotAPowerOfTwoIsAUsageErrorOnOneLine() {
        int code = run("decode", "--tp", "3", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--tp must be a power of two in 1..64 (1, 2, 4, 8 …), got 3")
                .doesNotContain("Exception");
    }

    @Test
    void aPeerTpSizeOutOfRangeIsAUsageError() {
        int code = run("prefill", "--peer-tp", "128", "--http-port", "0", "--notify-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--peer-tp must be a power of two in 1..64").doesNotContain("Exception");
    }

    @Test
    void serveBenchsTpOptionsPairByPositionAndOneValueGoesWithEveryOther() {
        assertThat(ServeBenchCommand.tpPairs(List.of(1, 2), List.of(1, 4)))
                .containsExactly(TpRanks.SINGLE, new TpRanks(2, 4));
        assertThat(ServeBenchCommand.tpPairs(List.of(2), List.of(1, 4)))
                .containsExactly(new TpRanks(2, 1), new TpRanks(2, 4));
        assertThat(ServeBenchCommand.tpPairs(null, null)).containsExactly(TpRanks.SINGLE);
    }

    @Test
    void serveBenchRefusesTpCountsThatDoNotPairAndSizesThatAreNotPowersOfTwo() {
        assertThatThrownBy(() -> ServeBenchCommand.tpPairs(List.of(1, 2, 4), List.of(1, 2)))
                .hasMessageContaining("--prefill-tp has 3 values and --decode-tp 2");
        assertThatThrownBy(() -> ServeBenchCommand.tpPairs(List.of(3), List.of(1)))
                .hasMessage("--prefill-tp 3 --decode-tp 1: prefill's TP size must be a power of two in 1..64 (1, 2,"
                        + " 4, 8 …), got 3");
    }

    @Test
    void chaosRefusesATpPairThatIsNotOneOnOneLine() {
        int code = run("chaos", "--prefill-tp", "6", "--requests", "3");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--prefill-tp 6 --decode-tp 1: prefill's TP size must be a power of two")
                .doesNotContain("Exception");
    }
}
