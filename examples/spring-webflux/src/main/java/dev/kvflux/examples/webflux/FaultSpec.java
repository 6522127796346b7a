package dev.kvflux.examples.webflux;

import com.fasterxml.jackson.annotation.JsonProperty;
import dev.kvflux.bindings.StatusCode;
import jakarta.validation.constraints.AssertTrue;
import jakarta.validation.constraints.Max;
import jakarta.validation.constraints.Min;
import jakarta.validation.constraints.NotNull;
import jakarta.validation.constraints.Size;
import java.time.Duration;

/**
 * A fault to inject into one layer's copies: {@code fail} (the layer's status turns into {@code code}
 * with {@code message}, {@code afterMs} after its post; ERR_RDMA_OP at once by default), {@code stall} (the status never completes) or
 * {@code slow} (the copy completes {@code afterMs} late).
 */
public record FaultSpec(
        @NotNull Kind kind,
        @NotNull @Min(0) Integer layer,
        StatusCode code,
        @Min(0) @Max(60_000) Long afterMs,
        @Size(max = 200) String message) {

    /** What happens to the chosen layer. */
    public enum Kind {
        @JsonProperty("fail") FAIL,
        @JsonProperty("stall") STALL,
        @JsonProperty("slow") SLOW
    }

    /** A failing layer needs a failure code; ERR_RDMA_OP when none is given. */
    @AssertTrue(message = "a fail fault needs a failure code (ERR_INVALID_ARGS, ERR_NOT_FOUND, ERR_RDMA_OP,"
            + " ERR_BAD_STATE or ERR_GPU_OP), not SUCCESS, INIT or IN_PROGRESS")
    public boolean isCodeAFailure() {
        return kind != Kind.FAIL || codeOrDefault().isFailure();
    }

    StatusCode codeOrDefault() {
        return code != null ? code : StatusCode.ERR_RDMA_OP;
    }

    String messageOrDefault() {
        return message != null ? message : "injected " + codeOrDefault() + " on layer " + layer;
    }

    Duration after() {
        return Duration.ofMillis(afterMs != null ? afterMs : 0);
    }
}
