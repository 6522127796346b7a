package dev.kvflux.bindings;

/**
 * The GPU event recorded after one layer's forward pass (a HIP or CUDA event, or a simulated one).
 * Copies of that layer may be posted once it is ready.
 */
public interface LayerEvent {

    /**
     * Queries the event without blocking.
     *
     * @throws RuntimeException if the event's work failed; the message names the runtime's error
     */
    EventState query();
}
