package dev.kvflux.tools.cli;

import dev.kvflux.serving.role.Policy;
import picocli.CommandLine;

/** Reads {@code legacy}, {@code seed} (vLLM's sliced-wait fix) or {@code kvflux}. */
public final class PolicyConverter implements CommandLine.ITypeConverter<Policy> {
    @Override
    public Policy convert(String value) {
        try {
            return Policy.of(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
    }
}
