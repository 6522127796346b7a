package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproBackendProvider;
import java.util.LinkedHashMap;
import java.util.SequencedMap;
import java.util.function.Function;

/**
 * {@code kvflux repro --backend mori}, {@code cuda} and {@code hip}, offered to {@link dev.kvflux.tools.repro.ReproBackends}
 * through the service loader (listed in {@code META-INF/services}), so that package need not name this one.
 */
public final class GpuReproBackends implements ReproBackendProvider {

    @Override
    public SequencedMap<String, Function<KvfluxConfig, ReproBackend>> backends() {
        SequencedMap<String, Function<KvfluxConfig, ReproBackend>> backends = new LinkedHashMap<>();
        backends.put("mori", MoriReproBackend::new);
        for (GpuPlatform platform : new GpuPlatform[] {GpuPlatform.CUDA, GpuPlatform.HIP}) {
            backends.put(platform.prefix(), config -> new GpuBackend(platform, config));
        }
        return backends;
    }
}
