package dev.kvflux.examples.webflux;

import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.write.WritePipeline;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** kvflux as beans: the engines, the completion wait (measured), the WRITE pipeline and its gauges. */
@Configuration(proxyBeanMethods = false)
public class KvfluxConfiguration {

    @Bean
    SimulatedEngines simulatedEngines() {
        return new SimulatedEngines();
    }

    /** The fail-fast completion wait from {@code kvflux.transfer.*}, measured as {@code kvflux.wait}. */
    @Bean
    WaitStrategy transferWait(TransferProperties properties, MeterRegistry registry) {
        CompletionWait wait = CompletionWait.failFast(properties.timeout()).slice(properties.slice());
        if (properties.stallAfter() != null) {
            wait = wait.stallAfter(properties.stallAfter());
        }
        return new MeteredWait(wait, registry);
    }

    @Bean
    WritePipeline writePipeline(WaitStrategy transferWait, TransferProperties properties) {
        return WritePipeline.builder()
                .waitStrategy(transferWait)
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
