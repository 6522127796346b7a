package dev.kvflux.examples.webflux;

import jakarta.validation.Valid;
import jakarta.validation.constraints.AssertTrue;
import jakarta.validation.constraints.Max;
import jakarta.validation.constraints.Min;
import jakarta.validation.constraints.NotNull;
import jakarta.validation.constraints.Pattern;

/**
 * The body of {@code POST /transfers}: a request's KV cache of {@code layers} layers, each
 * {@code blocksPerLayer} blocks of 32 KiB, written as one batch per layer; optionally a fault to inject
 * and the transfer id (a random UUID when absent).
 */
public record TransferRequest(
        @Pattern(regexp = "[A-Za-z0-9._:-]{1,64}", message = "must be 1 to 64 letters, digits or . _ : -")
        String transferId,
        @NotNull @Min(1) @Max(1024) Integer layers,
        @NotNull @Min(1) @Max(4096) Integer blocksPerLayer,
        @Valid FaultSpec fault) {

    @AssertTrue(message = "fault.layer must be one of the request's layers (0 to layers - 1)")
    public boolean isFaultOnALayer() {
        return fault == null || fault.layer() == null || layers == null || fault.layer() < layers;
    }
}
