package dev.kvflux.examples.webflux;

import jakarta.validation.constraints.Max;
import jakarta.validation.constraints.Min;
import jakarta.validation.constraints.NotNull;
import java.time.Duration;
import org.hibernate.validator.constraints.time.DurationMax;
import org.hibernate.validator.constraints.time.DurationMin;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.validation.annotation.Validated;

/**
 * The transfer settings, under {@code kvflux.transfer} ({@code application.yaml}, environment,
 * {@code --kvflux.transfer.timeout=5s}). A value out of range stops the application at startup with a
 * message naming the property.
 *
 * @param timeout how long the completion wait waits for every status of a transfer (default 30 s)
 * @param slice how often the completion wait polls the statuses still in flight (default 10 ms)
 * @param stallAfter when set, a transfer fails as stalled once no status has completed for this long
 * @param maxInFlight how many transfers run at once; more wait their turn (default 64)
 */
@Validated
@ConfigurationProperties("kvflux.transfer")
public record TransferProperties(
        @NotNull @DurationMin(millis = 1) @DurationMax(hours = 24) @DefaultValue("30s") Duration timeout,
        @NotNull @DurationMin(millis = 1) @DefaultValue("10ms") Duration slice,
        @DurationMin(millis = 1) Duration stallAfter,
        @Min(1) @Max(4096) @DefaultValue("64") int maxInFlight) {
}
