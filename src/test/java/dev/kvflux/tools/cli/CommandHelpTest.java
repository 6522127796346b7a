package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.tools.chaos.ChaosRun;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** What the commands' help says, and the names it offers. */
class CommandHelpTest {

    /** The help of {@code cmd} and of every command under it, plain text. */
    private static List<String> helps(CommandLine cmd) {
        List<String> helps = new ArrayList<>(List.of(cmd.getUsageMessage(CommandLine.Help.Ansi.OFF)));
        for (CommandLine sub : cmd.getSubcommands().values()) {
            helps.addAll(helps(sub));
        }
        return helps;
    }

    @Test
    void noHelpSaysSeedButForTheRandomNumberSeedOption() {
        List<String> helps = helps(KvfluxCli.commandLine());
        assertThat(helps).as("the main help and each command's").hasSizeGreaterThan(5);
        for (String help : helps) {
            String rest = help.replaceAll("\\s+", " ").replace("--seed=N", "").replace("random-number seed", "");
            assertThat(rest.toLowerCase()).as(help).doesNotContain("seed");
        }
    }

    @Test
    void policySeedStillReadsAsSlicedAndSaysItIsDeprecated() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PolicyConverter converter = new PolicyConverter(new PrintStream(err, true, StandardCharsets.UTF_8));

        assertThat(converter.convert("sliced")).isEqualTo(Policy.SLICED);
        assertThat(err.toString(StandardCharsets.UTF_8)).as("the current name warns of nothing").isEmpty();
        assertThat(converter.convert("seed")).isEqualTo(Policy.SLICED);
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("'seed' is deprecated").contains("write 'sliced'");
    }

    @Test
    void chaosHelpListsEveryBackendItRunsOnAndItsGpuOption() {
        String help = KvfluxCli.commandLine().getSubcommands().get("chaos").getUsageMessage(CommandLine.Help.Ansi.OFF)
                .replaceAll("\\s+", " ");
        for (String backend : EngineOptions.BACKENDS) {
            assertThat(help).contains(backend);
        }
        assertThat(help).contains("--gpu=N");
    }

    @Test
    void chaosRefusesAGpuForABackendWithoutOne() {
        StringWriter err = new StringWriter();
        int code = KvfluxCli.commandLine().setErr(new PrintWriter(err, true))
                .execute("chaos", "--backend", "native-sim", "--gpu", "1");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("--gpu chooses the GPU of --backend cuda, hip or mori");
    }

    @Test
    void chaosJsonNamesTheBackendTheRolesRanOn() {
        ChaosRun.Settings settings = new ChaosRun.Settings(6, 3, Duration.ofSeconds(1), 64, 2, List.of(),
                Path.of("unused"), "cuda", KvMode.READ, new TpRanks(2, 1), 1);
        ObjectNode json = ChaosCommand.toJson(settings, List.of());

        assertThat(json.path("backend").asText()).isEqualTo("cuda");
        assertThat(json.path("gpu").asInt()).isEqualTo(1);
        assertThat(json.path("kv_mode").asText()).isEqualTo("read");
        assertThat(json.path("prefill_tp").asInt()).isEqualTo(2);
        assertThat(json.path("faults").isArray()).isTrue();
    }
}
