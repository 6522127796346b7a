package dev.kvflux.tools.repro;

import dev.kvflux.serving.config.KvfluxConfig;
import java.util.SequencedMap;
import java.util.function.Function;

/**
 * Backends for {@code kvflux repro --backend} that live in other packages, which depend on this one and
 * so cannot be named here. {@link ReproBackends} finds each provider through {@link java.util.ServiceLoader}:
 * a provider is a public class with a public no-argument constructor, listed by its binary name in
 * {@code META-INF/services/dev.kvflux.tools.repro.ReproBackendProvider} on the class path (kvflux keeps
 * that file under {@code config/}, its resources root).
 */
public interface ReproBackendProvider {

    /**
     * The backends, by the name given to {@code --backend}, in the order the help lists them; each
     * factory builds its backend from the configuration.
     */
    SequencedMap<String, Function<KvfluxConfig, ReproBackend>> backends();
}
