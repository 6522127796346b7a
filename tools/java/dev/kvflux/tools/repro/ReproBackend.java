package dev.kvflux.tools.repro;

/**
 * A place {@code kvflux repro} can run vLLM's MoRI-IO measurement: the simulated engine, a native simulator,
 * a real GPU pair. The backends {@code --backend} knows are listed in {@code dev.kvflux.tools.cli.ReproBackends}.
 *
 * <h2>Adding a backend</h2>
 * Implement this interface with a public constructor taking the {@link dev.kvflux.serving.config.KvfluxConfig}
 * (it may ignore it), return a {@link ReproTarget} from {@link #open(ReproGeometry, ReproSettings)}, and add
 * one line to {@code ReproBackends}. If the backend cannot run here (no library, no GPU), {@code open} throws
 * an exception whose message says what is missing and how to get it; the command prints it and exits 1.
 */
public interface ReproBackend {

    /** The name given to {@code --backend} and printed in reports. */
    String name();

    /**
     * Sets up the engine and both buffers for requests of geometry {@code g}, for a run with
     * {@code settings}: a backend that blocks on its own (a GPU it waits for) bounds those blocks by the
     * run's transfer timeout; the GPU backends take their devices and options from {@link ReproSettings#gpu()}.
     */
    ReproTarget open(ReproGeometry g, ReproSettings settings);

    /** As {@link #open(ReproGeometry, ReproSettings)} with {@link ReproSettings#defaults()}. */
    default ReproTarget open(ReproGeometry g) {
        return open(g, ReproSettings.defaults());
    }
}
