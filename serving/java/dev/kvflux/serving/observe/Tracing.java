package dev.kvflux.serving.observe;

import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.handler.DefaultTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingReceiverTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingSenderTracingObservationHandler;
import io.micrometer.tracing.otel.bridge.OtelBaggageManager;
import io.micrometer.tracing.otel.bridge.OtelCurrentTraceContext;
import io.micrometer.tracing.otel.bridge.OtelPropagator;
import io.micrometer.tracing.otel.bridge.OtelTracer;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Tracing for the serving roles: an {@link ObservationRegistry} whose observations become OpenTelemetry spans
 * (Micrometer Tracing's OpenTelemetry bridge), propagated as W3C {@code traceparent}.
 *
 * <p>Off unless configured: a role given no registry uses {@link ObservationRegistry#NOOP}, records nothing and
 * sends no trace context. {@link #otlp} builds one exporting to an OTLP/HTTP endpoint; {@link #registry} builds
 * one over an OpenTelemetry the application already has (its exporter, sampler and resource apply).
 */
public final class Tracing implements AutoCloseable {
    private final OpenTelemetrySdk sdk;
    private final ObservationRegistry registry;

    private Tracing(OpenTelemetrySdk sdk, ObservationRegistry registry) {
        this.sdk = sdk;
        this.registry = registry;
    }

    /**
     * Spans of {@code serviceName} exported in batches to the OTLP/HTTP traces endpoint {@code endpoint}
     * (e.g. {@code http://collector:4318/v1/traces}), sent with the JDK's HTTP client. A trace is kept with
     * probability {@code sampleProbability}, decided where it starts: a request that arrives with a
     * {@code traceparent} follows its sampled flag.
     *
     * @throws IllegalArgumentException if {@code sampleProbability} is not in [0, 1] or the endpoint is not a
     *     URL
     */
    public static Tracing otlp(String endpoint, double sampleProbability, String serviceName) {
        Objects.requireNonNull(endpoint, "endpoint");
        Objects.requireNonNull(serviceName, "serviceName");
        if (!(sampleProbability >= 0 && sampleProbability <= 1)) {
            throw new IllegalArgumentException("the sample probability must be from 0 to 1, got " + sampleProbability);
        }
        SdkTracerProvider provider = SdkTracerProvider.builder()
                .setResource(Resource.getDefault().merge(Resource.create(Attributes.of(
                        AttributeKey.stringKey("service.name"), serviceName))))
                .setSampler(Sampler.parentBased(Sampler.traceIdRatioBased(sampleProbability)))
                .addSpanProcessor(BatchSpanProcessor.builder(OtlpHttpSpanExporter.builder().setEndpoint(endpoint)
                        .build()).build())
                .build();
        OpenTelemetrySdk sdk = OpenTelemetrySdk.builder().setTracerProvider(provider)
                .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance())).build();
        return new Tracing(sdk, registry(sdk, serviceName));
    }

    /**
     * A registry whose observations are spans of {@code openTelemetry}'s tracer {@code instrumentationName},
     * carried across processes by its propagators (W3C {@code traceparent} when it has none). Each
     * observation started with a sender or receiver context injects or extracts the trace context.
     */
    public static ObservationRegistry registry(OpenTelemetry openTelemetry, String instrumentationName) {
        io.opentelemetry.api.trace.Tracer otelTracer = openTelemetry.getTracer(instrumentationName);
        OtelCurrentTraceContext current = new OtelCurrentTraceContext();
        OtelTracer tracer = new OtelTracer(otelTracer, current, event -> { },
                new OtelBaggageManager(current, List.of(), List.of()));
        ContextPropagators propagators = openTelemetry.getPropagators().getTextMapPropagator().fields().isEmpty()
                ? ContextPropagators.create(W3CTraceContextPropagator.getInstance())
                : openTelemetry.getPropagators();
        OtelPropagator propagator = new OtelPropagator(propagators, otelTracer);
        ObservationRegistry registry = ObservationRegistry.create();
        registry.observationConfig().observationHandler(new ObservationHandler.FirstMatchingCompositeObservationHandler(
                new PropagatingSenderTracingObservationHandler<>(tracer, propagator),
                new PropagatingReceiverTracingObservationHandler<>(tracer, propagator),
                new DefaultTracingObservationHandler(tracer)));
        return registry;
    }

    /** The registry to give the roles' builders. */
    public ObservationRegistry observationRegistry() {
        return registry;
    }

    /** Exports what is still buffered (up to 5 s) and stops the exporter. */
    @Override
    public void close() {
        sdk.getSdkTracerProvider().shutdown().join(5, TimeUnit.SECONDS);
    }
}
