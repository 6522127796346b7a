package dev.kvflux.tools.repro;

/**
 * A place {@code kvflux repro} can run the seed's experiment: the simulated engine, a native simulator,
 * a real GPU pair. Backends are listed in {@link ReproBackends}.
 *
 * <h2>Adding a backend</h2>
 * Implement this interface with a constructor taking the {@link dev.kvflux.serving.config.KvfluxConfig}
 * (it may ignore it), return a {@link ReproTarget} from {@link #open}, and add one line to
 * {@link ReproBackends} (a backend in this package) or list it from a {@link ReproBackendProvider} (a
 * backend in a package that depends on this one, as the GPU backends do). If the backend cannot run here (no library, no GPU), {@link #open} throws an
 * exception whose message says what is missing and how to get it; the command prints it and exits 1.
 */
public interface ReproBackend {

    /** The name given to {@code --backend} and printed in reports. */
    String name();

    /** Sets up the engine and both buffers for requests of geometry {@code g}. */
    ReproTarget open(ReproGeometry g);

    /**
     * Sets up for a run with {@code settings}, which {@link ReproRun} passes: a backend that blocks on
     * its own (a GPU it waits for) overrides this to bound those blocks by the run's transfer timeout.
     * By default {@link #open(ReproGeometry)}.
     */
    default ReproTarget open(ReproGeometry g, ReproSettings settings) {
        return open(g);
    }
}
