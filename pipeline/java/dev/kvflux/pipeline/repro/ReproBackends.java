package dev.kvflux.pipeline.repro;

import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.pipeline.config.KvfluxConfig;
import dev.kvflux.pipeline.gpu.GpuBackend;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/** The backends {@code kvflux repro --backend} knows, by name: one line each. */
public final class ReproBackends {
    private static final Map<String, Function<KvfluxConfig, ReproBackend>> BACKENDS = new LinkedHashMap<>();

    static {
        BACKENDS.put("sim-xgmi", SimXgmiBackend::new);
        BACKENDS.put("cuda", config -> new GpuBackend(GpuPlatform.CUDA, config));
        BACKENDS.put("hip", config -> new GpuBackend(GpuPlatform.HIP, config));
    }

    private ReproBackends() {
    }

    public static Set<String> names() {
        return BACKENDS.keySet();
    }

    /**
     * The backend called {@code name}, configured from {@code config}.
     *
     * @throws IllegalArgumentException naming the known backends if there is none by that name
     */
    public static ReproBackend named(String name, KvfluxConfig config) {
        Function<KvfluxConfig, ReproBackend> factory = BACKENDS.get(name);
        if (factory == null) {
            throw new IllegalArgumentException("unknown backend '" + name + "'; known backends: "
                    + String.join(", ", BACKENDS.keySet()));
        }
        return factory.apply(config);
    }
}
