package dev.kvflux.tools.repro;

import dev.kvflux.serving.config.KvfluxConfig;
import java.time.Duration;
import java.util.Objects;

/**
 * What a backend and a strategy factory may read: the run's transfer timeout and slice, the whole
 * configuration, and how the GPU backends use the GPUs.
 */
public record ReproSettings(Duration transferTimeout, Duration slice, KvfluxConfig config, GpuSettings gpu) {
    public ReproSettings {
        Objects.requireNonNull(transferTimeout, "transferTimeout");
        Objects.requireNonNull(slice, "slice");
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(gpu, "gpu");
    }

    /** Settings with the GPU backends' defaults. */
    public ReproSettings(Duration transferTimeout, Duration slice, KvfluxConfig config) {
        this(transferTimeout, slice, config, GpuSettings.DEFAULTS);
    }

    /** The built-in configuration's transfer timeout and slice, and the GPU backends' defaults. */
    public static ReproSettings defaults() {
        KvfluxConfig config = KvfluxConfig.defaults();
        return new ReproSettings(config.transfer().timeout(), config.transfer().slice(), config);
    }

    /** These settings with {@code other} for the GPU backends. */
    public ReproSettings withGpu(GpuSettings other) {
        return new ReproSettings(transferTimeout, slice, config, other);
    }
}
