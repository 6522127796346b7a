package dev.kvflux.pipeline.cli;

import dev.kvflux.pipeline.serve.Policy;
import picocli.CommandLine;

/** Reads {@code legacy}, {@code seed} or {@code kvflux}. */
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
