package dev.kvflux.tools.cli;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import ch.qos.logback.core.joran.spi.JoranException;
import dev.kvflux.serving.config.KvfluxConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code --config PATH} and {@code --logback PATH}, for any subcommand ({@code @Mixin ConfigOptions}).
 * {@link #load} applies the logging file, then returns the configuration or throws a
 * {@link CommandLine.ParameterException} listing every bad key.
 */
public final class ConfigOptions {
    @Option(names = "--config", paramLabel = "PATH",
            description = "A YAML file whose keys override the built-in kvflux.yaml one by one.")
    Path config;

    @Option(names = "--logback", paramLabel = "PATH",
            description = "A logback.xml to use instead of the built-in one (which logs to stderr).")
    Path logback;

    /** Applies {@code --logback}, then loads the configuration with {@code --config} laid over the defaults. */
    public KvfluxConfig load(CommandLine cmd) {
        if (logback != null) {
            configureLogback(cmd, logback);
        }
        return KvfluxConfig.load(Optional.ofNullable(config)).fold(errors -> {
            throw new CommandLine.ParameterException(cmd, "invalid configuration"
                    + (config != null ? " in " + config : "") + ":" + System.lineSeparator() + "  "
                    + errors.mkString(System.lineSeparator() + "  "));
        }, c -> c);
    }

    private static void configureLogback(CommandLine cmd, Path file) {
        if (!Files.isReadable(file)) {
            throw new CommandLine.ParameterException(cmd, "logback file " + file + " does not exist or cannot be read");
        }
        if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext context)) {
            throw new CommandLine.ParameterException(cmd, "--logback needs logback as the SLF4J binding");
        }
        context.reset();
        JoranConfigurator configurator = new JoranConfigurator();
        configurator.setContext(context);
        try {
            configurator.doConfigure(file.toFile());
        } catch (JoranException e) {
            throw new CommandLine.ParameterException(cmd, "logback file " + file + " is invalid: " + e.getMessage());
        }
    }
}
