package dev.kvflux.pipeline;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import java.util.Objects;

/** One layer of a request to write: its index, the GPU event after its forward pass, and its block copies. */
public record LayerWrite(int layer, LayerEvent event, BatchPlan plan) {
    public LayerWrite {
        if (layer < 0) {
            throw new IllegalArgumentException("layer index must be 0 or more, got " + layer);
        }
        Objects.requireNonNull(event, "event");
        Objects.requireNonNull(plan, "plan");
    }
}
