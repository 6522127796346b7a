package dev.kvflux.examples.webflux;

import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WritePipeline;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * kvflux as beans: the engines, the completion wait (observed with Reactor's tap), the wait recorder
 * (kvflux-micrometer, on Spring's {@link MeterRegistry}), the WRITE pipeline and its gauges.
 */
@Configuration(proxyBeanMethods = false)
public class KvfluxConfiguration {

    @Bean
    SimulatedEngines simulatedEngines() {
        return new SimulatedEngines();
    }

    /**
     * kvflux's wait meters ({@code kvflux.wait.duration}, {@code .detection.lag}, {@code .statuses.failed},
     * {@code .polls}, ...) in the application's registry, so Actuator serves them.
     */
    @Bean
    WaitRecorder waitRecorder(MeterRegistry registry) {
        return MicrometerWaitRecorder.of(registry);
    }

    /** The fail-fast completion wait from {@code kvflux.transfer.*}, observed with Reactor's tap. */
    @Bean
    WaitStrategy transferWait(TransferProperties properties, MeterRegistry registry) {
        CompletionWait wait = CompletionWait.failFast(properties.timeout()).slice(properties.slice());
        if (properties.stallAfter() != null) {
            wait = wait.stallAfter(properties.stallAfter());
        }
        return new MeteredWait(wait, registry);
    }

    /** Every request's wait reports to {@code waitRecorder}. */
    @Bean
    WritePipeline writePipeline(WaitStrategy transferWait, WaitRecorder waitRecorder, TransferProperties properties) {
        return WritePipeline.builder()
                .waitStrategy(transferWait)
                .recorder(waitRecorder)
                .maxInFlight(properties.maxInFlight())
                .build();
    }

    /** {@code kvflux.pipeline.requests.in.flight} and {@code .queued}: the pipeline's places, now. */
    @Bean
    MeterBinder writePipelineGauges(WritePipeline pipeline) {
        return registry -> {
            Gauge.builder("kvflux.pipeline.requests.in.flight", pipeline, WritePipeline::requestsInFlight)
                    .description("Transfers holding one of the pipeline's maxInFlight places")
                    .register(registry);
            Gauge.builder("kvflux.pipeline.requests.queued", pipeline, WritePipeline::requestsQueued)
                    .description("Transfers waiting for a place in the pipeline")
                    .register(registry);
        };
    }
}
