package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproRun;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code kvflux repro}'s requests, geometry and durations. */
class ReproOptionsTest {
    private final StringWriter err = new StringWriter();

    private static ReproCommand parsed(String... args) {
        CommandLine cmd = new CommandLine(new ReproCommand());
        cmd.parseArgs(args);
        return cmd.getCommand();
    }

    private static List<ReproRun.Plan> plans(String... args) {
        ReproCommand repro = parsed(args);
        return repro.plans(repro.spec.commandLine());
    }

    private int run(String... args) {
        return KvfluxCli.commandLine().setErr(new PrintWriter(err, true)).execute(args);
    }

    @Test
    void timeoutsParseAsPeopleWriteThemInAnyCase() {
        DurationConverter durations = new DurationConverter();
        assertThat(durations.convert("30s")).isEqualTo(Duration.ofSeconds(30));
        assertThat(durations.convert("500ms")).isEqualTo(Duration.ofMillis(500));
        assertThat(durations.convert("2.5")).isEqualTo(Duration.ofMillis(2500));
        assertThat(durations.convert("30S")).isEqualTo(Duration.ofSeconds(30));
        assertThat(durations.convert("500MS")).isEqualTo(Duration.ofMillis(500));
    }

    @Test
    void aBadTimeoutSaysWhatTheOptionTakes() {
        assertThat(run("repro", "--transfer-timeout", "3x")).isEqualTo(2);
        assertThat(err.toString()).startsWith("Invalid value for option '--transfer-timeout': '3x' is not a duration;")
                .doesNotContain("Exception");
    }

    @Test
    void theDefaultsAreTheWholeTimeoutWaitForTwoRequestsThenTheReactiveOneForAHundredOnVllmsGeometry() {
        assertThat(plans()).containsExactly(new ReproRun.Plan("native", 2), new ReproRun.Plan("reactive", 100));
        ReproCommand repro = parsed();
        assertThat(repro.geometry(repro.spec.commandLine())).isEqualTo(ReproGeometry.VLLM_MORI_IO)
                .isEqualTo(new ReproGeometry(118, 128, 32 * 1024));
    }

    @Test
    void nativeRequestsCountForTheWholeTimeoutWaitAloneAndRequestsForTheRest() {
        assertThat(plans("--wait", "native,sliced-native", "--requests", "20")).containsExactly(
                new ReproRun.Plan("native", 20), new ReproRun.Plan("sliced-native", 20));
        assertThat(plans("--wait", "native,reactive-push", "--requests", "20", "--native-requests", "3"))
                .containsExactly(new ReproRun.Plan("native", 3), new ReproRun.Plan("reactive-push", 20));
        assertThat(plans("--native-requests", "1")).containsExactly(new ReproRun.Plan("native", 1),
                new ReproRun.Plan("reactive", 100));
    }

    @Test
    void warmUpRequestsGoBeforeEveryStrategyButTheWholeTimeoutWait() {
        assertThat(plans("--wait", "native,reactive-push,reactive-push-direct", "--warmup", "50")).containsExactly(
                new ReproRun.Plan("native", 2, 0), new ReproRun.Plan("reactive-push", 100, 50),
                new ReproRun.Plan("reactive-push-direct", 100, 50));
        assertThat(run("repro", "--warmup", "-1")).isEqualTo(2);
        assertThat(err.toString()).startsWith("--warmup must be 0 to 100000, got -1").doesNotContain("Exception");
    }

    @Test
    void theGeometryIsThreeOptions() {
        ReproCommand repro = parsed("--layers", "4", "--blocks", "8", "--block-bytes", "4096");
        assertThat(repro.geometry(repro.spec.commandLine())).isEqualTo(new ReproGeometry(4, 8, 4096));
    }

    @Test
    void aGeometryTooLargeForMemoryIsAUsageError() {
        assertThat(run("repro", "--layers", "4096", "--blocks", "65536", "--block-bytes", "1048576")).isEqualTo(2);
        assertThat(err.toString()).startsWith("--layers x --blocks x --block-bytes: each side's buffer would hold"
                + " 524288.0 GiB").doesNotContain("Exception");
    }

    @Test
    void fewerThanOneNativeRequestIsAUsageError() {
        assertThat(run("repro", "--native-requests", "0")).isEqualTo(2);
        assertThat(err.toString()).isEqualToIgnoringNewLines("--native-requests must be at least 1, got 0");
    }
}
