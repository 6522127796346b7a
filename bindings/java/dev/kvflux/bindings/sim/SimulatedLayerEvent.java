package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import reactor.core.scheduler.Scheduler;

/**
 * A layer's GPU event, simulated: ready from a time on a scheduler's clock, or failing from that time
 * with a message (as a HIP error would be reported).
 */
public final class SimulatedLayerEvent implements LayerEvent {
    private static final SimulatedLayerEvent READY = new SimulatedLayerEvent(null, Long.MIN_VALUE, null);

    private final Scheduler clock;
    private final long at;
    private final String error;

    private SimulatedLayerEvent(Scheduler clock, long at, String error) {
        this.clock = clock;
        this.at = at;
        this.error = error;
    }

    /** An event that is ready already. */
    public static SimulatedLayerEvent ready() {
        return READY;
    }

    /** An event that turns ready {@code after} from now on {@code clock}. */
    public static SimulatedLayerEvent readyAfter(Scheduler clock, Duration after) {
        return new SimulatedLayerEvent(Objects.requireNonNull(clock, "clock"),
                clock.now(TimeUnit.NANOSECONDS) + after.toNanos(), null);
    }

    /** An event whose query throws {@code error} from {@code after} on; not ready before. */
    public static SimulatedLayerEvent failsAfter(Scheduler clock, Duration after, String error) {
        return new SimulatedLayerEvent(Objects.requireNonNull(clock, "clock"),
                clock.now(TimeUnit.NANOSECONDS) + after.toNanos(), Objects.requireNonNull(error, "error"));
    }

    /** An event that is never ready. */
    public static SimulatedLayerEvent never() {
        return new SimulatedLayerEvent(null, Long.MAX_VALUE, null);
    }

    @Override
    public EventState query() {
        if (at == Long.MIN_VALUE) {
            return EventState.READY;
        }
        if (clock == null || clock.now(TimeUnit.NANOSECONDS) < at) {
            return EventState.NOT_READY;
        }
        if (error != null) {
            throw new IllegalStateException(error);
        }
        return EventState.READY;
    }
}
