package dev.kvflux.pipeline.cli;

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
            HostileCommand.class,
        })
public final class KvfluxCli implements Runnable {

    @Override
    public void run() {
        CommandLine.usage(this, System.out);
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new KvfluxCli()).execute(args));
    }
}
