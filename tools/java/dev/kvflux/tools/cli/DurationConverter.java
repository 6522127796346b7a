package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.Durations;
import java.time.Duration;
import java.util.Locale;
import picocli.CommandLine;

/** Reads {@code 3s}, {@code 500ms}, {@code 30} (seconds), in any case ({@code 30S}), for picocli options. */
public final class DurationConverter implements CommandLine.ITypeConverter<Duration> {
    @Override
    public Duration convert(String value) {
        try {
            return Durations.parse(value);
        } catch (IllegalArgumentException e) {
            try {
                return Durations.parse(value.toLowerCase(Locale.ROOT));
            } catch (IllegalArgumentException stillNot) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }
}
