package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** Option blocks that several commands share come from one mixin each, with the same names everywhere. */
class SharedOptionsTest {
    private static final CommandLine CLI = KvfluxCli.commandLine();

    private static Set<String> options(String command) {
        Set<String> names = new TreeSet<>();
        CLI.getSubcommands().get(command).getCommandSpec().options().forEach(o -> names.addAll(List.of(o.names())));
        return names;
    }

    @Test
    void prefillAndDecodeTakeTheRoleConfigurationAndModelOptionsAlike() {
        List<String> shared = List.of("--config", "--logback", "--prefill-tokens-per-second", "--max-batched-tokens",
                "--layers", "--decode-step", "--host", "--http-port", "--notify-port", "--proxy");
        assertThat(options("prefill")).containsAll(shared);
        assertThat(options("decode")).containsAll(shared);
    }

    @Test
    void everyCommandPrintingATableOrJsonTakesTheSameJsonOption() {
        for (String command : List.of("repro", "serve-bench", "bench", "hostile")) {
            CommandLine.Model.OptionSpec json = CLI.getSubcommands().get(command).getCommandSpec().findOption("--json");
            assertThat(json).as(command).isNotNull();
            assertThat(json.description()).as(command)
                    .containsExactly("Print one JSON document on stdout instead of the table.");
        }
    }

    @Test
    void aBadModelValueGivenToPrefillIsStillAUsageError() {
        StringWriter err = new StringWriter();
        int code = KvfluxCli.commandLine().setErr(new PrintWriter(err, true))
                .execute("prefill", "--layers", "0", "--http-port", "1", "--notify-port", "1");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("invalid simulated model: ").doesNotContain("Exception");
    }

    @Test
    void eachRolesHelpNamesTheNotifySecretsVariable() {
        for (String command : List.of("prefill", "decode", "proxy")) {
            String help = CLI.getSubcommands().get(command).getUsageMessage();
            assertThat(help.replaceAll("\\s+", " ")).as(command).contains("KVFLUX_NOTIFY_SECRET");
        }
    }

    @Test
    void aClientShareOutsideZeroToOneIsAUsageErrorOnBothRoles() {
        for (String command : List.of("prefill", "decode")) {
            StringWriter err = new StringWriter();
            int code = KvfluxCli.commandLine().setErr(new PrintWriter(err, true))
                    .execute(command, "--client-share", "1.5", "--http-port", "1", "--notify-port", "1");

            assertThat(code).as(command).isEqualTo(2);
            assertThat(err.toString()).as(command).startsWith("--client-share must be more than 0 and at most 1")
                    .doesNotContain("Exception");
        }
    }
}
