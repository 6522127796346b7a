package dev.kvflux.tools.repro;

import dev.kvflux.serving.config.KvfluxConfig;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.function.Function;

/**
 * The backends {@code kvflux repro --backend} knows, by name: this package's own (one line each), then
 * those of every {@link ReproBackendProvider} on the class path, in the order the service loader finds
 * them (the GPU backends, {@code mori}, {@code cuda} and {@code hip}, come from {@code dev.kvflux.pipeline.gpu}
 * that way).
 */
public final class ReproBackends {
    private static volatile Map<String, Function<KvfluxConfig, ReproBackend>> backends;

    private ReproBackends() {
    }

    /**
     * The known names, in the order the help lists them.
     *
     * @throws IllegalStateException if two backends are called the same
     */
    public static Set<String> names() {
        return all().keySet();
    }

    /**
     * The backend called {@code name}, configured from {@code config}.
     *
     * @throws IllegalArgumentException naming the known backends if there is none by that name
     * @throws IllegalStateException if two backends are called the same
     */
    public static ReproBackend named(String name, KvfluxConfig config) {
        Function<KvfluxConfig, ReproBackend> factory = all().get(name);
        if (factory == null) {
            throw new IllegalArgumentException("unknown backend '" + name + "'; known backends: "
                    + String.join(", ", names()));
        }
        return factory.apply(config);
    }

    private static Map<String, Function<KvfluxConfig, ReproBackend>> all() {
        Map<String, Function<KvfluxConfig, ReproBackend>> known = backends;
        if (known == null) {
            synchronized (ReproBackends.class) {
                known = backends;
                if (known == null) {
                    known = Collections.unmodifiableMap(collect());
                    backends = known;
                }
            }
        }
        return known;
    }

    private static Map<String, Function<KvfluxConfig, ReproBackend>> collect() {
        Map<String, Function<KvfluxConfig, ReproBackend>> known = new LinkedHashMap<>();
        known.put("sim-xgmi", SimXgmiBackend::new);
        known.put("native-sim", NativeSimBackend::new);
        for (ReproBackendProvider provider : ServiceLoader.load(ReproBackendProvider.class,
                ReproBackends.class.getClassLoader())) {
            provider.backends().forEach((name, factory) -> {
                if (known.putIfAbsent(name, factory) != null) {
                    throw new IllegalStateException("two repro backends are called '" + name + "' (one from "
                            + provider.getClass().getName() + "); rename one of them");
                }
            });
        }
        return known;
    }
}
