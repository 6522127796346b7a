package dev.kvflux.tools.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code kvflux} command: one subcommand per job. */
@Command(name = "kvflux", mixinStandardHelpOptions = true, version = "kvflux 0.1.0",
        description = "Moves an LLM request's KV cache from prefill to decode and tells decode when it has arrived.",
        subcommands = {
            // Each job registers its subcommand class here, one line each.
            ReproCommand.class,
            PrefillCommand.class,
            DecodeCommand.class,
            ProxyCommand.class,
            ServeBenchCommand.class,
            ChaosCommand.class,
            BenchCommand.class,
            HostileCommand.class,
            ProxyProbeCommand.class,
            ProxyBenchCommand.class,
            BundleCommand.class,
        })
public final class KvfluxCli implements Runnable {

    @Override
    public void run() {
        CommandLine.usage(this, System.out);
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /**
     * The {@code kvflux} command line: a bad option or configuration value prints one line saying what was
     * wrong (and, for an unknown option, picocli's suggestions) and exits with 2, without the usage text; a
     * file the command cannot read or write prints one line and exits with 1.
     */
    public static CommandLine commandLine() {
        CommandLine cmd = new CommandLine(new KvfluxCli());
        cmd.setParameterExceptionHandler((ex, args) -> {
            CommandLine failed = ex.getCommandLine();
            failed.getErr().println(ex.getMessage());
            CommandLine.UnmatchedArgumentException.printSuggestions(ex, failed.getErr());
            failed.getErr().flush();
            return failed.getCommandSpec().exitCodeOnInvalidInput();
        });
        cmd.setExecutionExceptionHandler((ex, failed, parseResult) -> {
            if (ex instanceof java.io.IOException || ex instanceof java.io.UncheckedIOException) {
                failed.getErr().println("kvflux " + failed.getCommandName() + ": " + ex.getMessage());
                failed.getErr().flush();
                return failed.getCommandSpec().exitCodeOnExecutionException();
            }
            throw ex;
        });
        return cmd;
    }
}
