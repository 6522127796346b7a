package dev.kvflux.tools.repro;

import dev.kvflux.serving.config.KvfluxConfig;
import java.time.Duration;
import java.util.Objects;

/** What a strategy factory may read: the run's transfer timeout and slice, and the whole configuration. */
public record ReproSettings(Duration transferTimeout, Duration slice, KvfluxConfig config) {
    public ReproSettings {
        Objects.requireNonNull(transferTimeout, "transferTimeout");
        Objects.requireNonNull(slice, "slice");
        Objects.requireNonNull(config, "config");
    }
}
