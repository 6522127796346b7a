package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.observe.Tracing;
import io.micrometer.observation.ObservationRegistry;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code --otlp-endpoint URL} for the serving roles ({@code @Mixin TracingOptions}): where spans go, over the
 * configuration's {@code tracing.otlp-endpoint}; {@link #start} builds the role's tracing from both.
 */
public final class TracingOptions {
    @Option(names = "--otlp-endpoint", paramLabel = "URL",
            description = "Export this role's spans to the OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces);"
                    + " default: tracing.otlp-endpoint of the configuration, empty = no tracing.")
    String otlpEndpoint;

    /**
     * The role's tracing, named {@code serviceName}, or null when no endpoint is configured (the role then
     * uses {@link ObservationRegistry#NOOP}).
     *
     * @throws CommandLine.ParameterException if {@code --otlp-endpoint} is not an http(s) URL
     */
    Tracing start(KvfluxConfig config, String serviceName, CommandLine cmd) {
        KvfluxConfig.TraceExport configured = config.tracing();
        KvfluxConfig.TraceExport export;
        try {
            export = otlpEndpoint == null ? configured : configured.withEndpoint(otlpEndpoint);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--otlp-endpoint: " + e.getMessage());
        }
        return export.otlpEndpoint().map(endpoint -> Tracing.otlp(endpoint.toString(), export.sampleProbability(),
                serviceName)).orElse(null);
    }

    /** The registry a role is given for {@code tracing} from {@link #start}. */
    static ObservationRegistry registry(Tracing tracing) {
        return tracing == null ? ObservationRegistry.NOOP : tracing.observationRegistry();
    }
}
