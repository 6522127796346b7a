package dev.kvflux.serving.observe;

import io.micrometer.observation.Observation;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A started observation that ends once, whichever of the paths that may end it comes first (the step
 * finished, the transfer was aborted, the request ended). Thread-safe.
 */
public final class Step {
    /** A step that is already over: ending it does nothing. */
    public static final Step NONE = new Step(null);

    private final AtomicReference<Observation> open;

    private Step(Observation observation) {
        this.open = new AtomicReference<>(observation);
    }

    /** {@code observation}, already started, to be ended by this step. */
    public static Step of(Observation observation) {
        return new Step(observation);
    }

    /** Ends the observation if it is still open. */
    public void stop() {
        Observation observation = open.getAndSet(null);
        if (observation != null) {
            observation.stop();
        }
    }

    /** Ends the observation with {@code error} if it is still open. */
    public void fail(Throwable error) {
        Observation observation = open.getAndSet(null);
        if (observation != null) {
            observation.error(error);
            observation.stop();
        }
    }
}
