package dev.kvflux.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WritePipeline;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.validation.autoconfigure.ValidationAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** The kvflux beans from {@code kvflux.transfer.*}, in a context without a web server. */
class TransferPropertiesTest {

    private final ApplicationContextRunner context = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ValidationAutoConfiguration.class))
            .withUserConfiguration(Registry.class, KvfluxConfiguration.class);

    @Test
    void theSettingsReachTheWaitAndThePipeline() {
        context.withPropertyValues("kvflux.transfer.timeout=2s", "kvflux.transfer.slice=5ms",
                        "kvflux.transfer.max-in-flight=8")
                .run(beans -> {
                    assertThat(beans).hasNotFailed();
                    assertThat(beans.getBean(WaitStrategy.class))
                            .hasToString("MeteredWait[CompletionWait[FAIL_FAST, timeout 2s, slice 5ms]]");
                    assertThat(beans.getBean(WritePipeline.class).maxInFlight()).isEqualTo(8);
                });
    }

    @Test
    void aSliceOfZeroStopsStartupNamingTheProperty() {
        context.withPropertyValues("kvflux.transfer.slice=0ms")
                .run(beans -> assertThat(beans).getFailure().rootCause()
                        .hasMessageContaining("kvflux.transfer")
                        .hasMessageContaining("slice"));
    }

    @Test
    void aSliceLongerThanTheTimeoutStopsStartupWithTheLibrarysReason() {
        context.withPropertyValues("kvflux.transfer.timeout=1s", "kvflux.transfer.slice=2s")
                .run(beans -> assertThat(beans).getFailure().rootCause()
                        .isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("is longer than the transfer timeout"));
    }

    @Test
    void maxInFlightUnderOneStopsStartupNamingTheProperty() {
        context.withPropertyValues("kvflux.transfer.max-in-flight=0")
                .run(beans -> assertThat(beans).getFailure().rootCause()
                        .hasMessageContaining("maxInFlight"));
    }

    @Configuration(proxyBeanMethods = false)
    @EnableConfigurationProperties(TransferProperties.class)
    static class Registry {
        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }
}
