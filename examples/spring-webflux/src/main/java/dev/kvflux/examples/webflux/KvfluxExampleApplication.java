package dev.kvflux.examples.webflux;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/**
 * A Spring Boot WebFlux application that embeds the kvflux library: {@code POST /transfers} runs one
 * simulated KV-cache transfer through a {@link dev.kvflux.pipeline.WritePipeline} and answers
 * {@code write_done} or {@code write_failed}; Actuator serves kvflux's meters at
 * {@code /actuator/prometheus}.
 */
@SpringBootApplication
@ConfigurationPropertiesScan
public class KvfluxExampleApplication {

    public static void main(String[] args) {
        SpringApplication.run(KvfluxExampleApplication.class, args);
    }
}
