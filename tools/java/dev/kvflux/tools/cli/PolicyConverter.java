package dev.kvflux.tools.cli;

import dev.kvflux.serving.role.Policy;
import java.io.PrintStream;
import picocli.CommandLine;

/**
 * Reads {@code legacy}, {@code sliced} (vLLM's sliced-wait fix) or {@code kvflux}; {@code seed}, the old name of
 * {@code sliced}, is read as it with a warning on stderr that it is deprecated.
 */
public final class PolicyConverter implements CommandLine.ITypeConverter<Policy> {
    private final PrintStream warnings;

    /** A converter that warns on {@link System#err}, as picocli makes it. */
    public PolicyConverter() {
        this(System.err);
    }

    /** A converter that warns on {@code warnings}. */
    PolicyConverter(PrintStream warnings) {
        this.warnings = warnings;
    }

    @Override
    public Policy convert(String value) {
        Policy policy;
        try {
            policy = Policy.of(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
        String deprecation = Policy.deprecation(value);
        if (deprecation != null) {
            warnings.println("kvflux: warning: --policy: " + deprecation);
        }
        return policy;
    }
}
