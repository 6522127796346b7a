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
}
