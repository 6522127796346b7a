package dev.kvflux.tools.cli;

import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.NativeSimBackend;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.SimXgmiBackend;
import dev.kvflux.tools.repro.gpu.GpuBackend;
import dev.kvflux.tools.repro.gpu.MoriReproBackend;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * The backends {@code kvflux repro --backend} knows, by name, one line each, in the order the help lists
 * them. It lives beside the command rather than in {@code repro}, so that {@code repro.gpu} depends on
 * {@code repro} and never the other way.
 */
public final class ReproBackends {
    /** The backends that write between GPUs, and so take {@code kvflux repro}'s GPU options. */
    static final Set<String> GPU = Set.of(MoriReproBackend.NAME, GpuPlatform.CUDA.prefix(), GpuPlatform.HIP.prefix());

    private static final Map<String, Function<KvfluxConfig, ReproBackend>> BACKENDS = backends();

    private ReproBackends() {
    }

    private static Map<String, Function<KvfluxConfig, ReproBackend>> backends() {
        Map<String, Function<KvfluxConfig, ReproBackend>> known = new LinkedHashMap<>();
        known.put("sim-xgmi", SimXgmiBackend::new);
        known.put("native-sim", NativeSimBackend::new);
        known.put(MoriReproBackend.NAME, MoriReproBackend::new);
        for (GpuPlatform platform : new GpuPlatform[] {GpuPlatform.CUDA, GpuPlatform.HIP}) {
            known.put(platform.prefix(), config -> new GpuBackend(platform, config));
        }
        return Collections.unmodifiableMap(known);
    }

    /** The known names, in the order the help lists them. */
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
                    + String.join(", ", names()));
        }
        return factory.apply(config);
    }
}
