package dev.kvflux.tools.cli;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;

/** One {@code kvflux} command run in this JVM: its exit code and what it printed on stdout and stderr. */
public record CliCall(int code, String out, String err) {
    /** Runs {@code kvflux COMMAND ARGS}, {@code args} split at blanks. */
    public static CliCall of(String command, String args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        picocli.CommandLine cmd = KvfluxCli.commandLine();
        cmd.setOut(new PrintWriter(out));
        cmd.setErr(new PrintWriter(err));
        List<String> argv = new ArrayList<>(List.of(command));
        argv.addAll(List.of(args.trim().split("\\s+")));
        int code = cmd.execute(argv.toArray(String[]::new));
        return new CliCall(code, out.toString(), err.toString());
    }

    /**
     * Asserts that this call was refused as a usage error: exit code 2, nothing on stdout, and one line on stderr,
     * with no stack trace, starting with {@code message}.
     */
    public void assertUsageError(String message) {
        org.assertj.core.api.Assertions.assertThat(code).as("exit code of a usage error").isEqualTo(2);
        org.assertj.core.api.Assertions.assertThat(err).startsWith(message).doesNotContain("\tat ");
        org.assertj.core.api.Assertions.assertThat(err.strip().lines().count()).as("lines on stderr").isOne();
        org.assertj.core.api.Assertions.assertThat(out).isEmpty();
    }
}
