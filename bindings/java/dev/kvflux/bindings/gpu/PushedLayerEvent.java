package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A layer event that announces itself: recorded on the compute stream with a host function right behind
 * it, so {@link #ready()} completes when the stream passes the event, with nobody polling. {@link #query()}
 * still polls the event, for callers that want to.
 */
public final class PushedLayerEvent implements LayerEvent {
    private final GpuEvent event;
    private final Sinks.Empty<Void> ready = Sinks.empty();

    private PushedLayerEvent(GpuEvent event) {
        this.event = event;
    }

    /**
     * Records {@code event} at the end of {@code stream} and queues the host function that completes
     * {@link #ready()}.
     *
     * @throws GpuException if recording or queueing fails
     */
    public static PushedLayerEvent recordOn(GpuStream stream, GpuEvent event) {
        PushedLayerEvent pushed = new PushedLayerEvent(event);
        event.record(stream);
        stream.launchHostFunction(pushed::fire);
        return pushed;
    }

    /** Completes (empty) on kvflux's host-function thread once the stream has passed the event. */
    public Mono<Void> ready() {
        return ready.asMono();
    }

    @Override
    public EventState query() {
        return event.query();
    }

    private void fire() {
        ready.tryEmitEmpty();
    }
}
