package dev.kvflux.tools.cli;

import picocli.CommandLine.Option;

/** {@code --json}, for a command that prints either a table or one JSON document ({@code @Mixin JsonOption}). */
public final class JsonOption {
    @Option(names = "--json", description = "Print one JSON document on stdout instead of the table.")
    boolean json;

    /** Whether {@code --json} was given. */
    boolean json() {
        return json;
    }
}
