package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import java.nio.file.Path;
import java.util.Optional;

/** Loads the GPU runtime the reproducers run on. */
final class GpuRuntimes {
    private GpuRuntimes() {
    }

    /** {@code platform}'s runtime: the library file {@value GpuRuntime#LIBRARY_PROPERTY} names, else the first found. */
    static GpuRuntime load(GpuPlatform platform) {
        String library = System.getProperty(GpuRuntime.LIBRARY_PROPERTY);
        return library != null && !library.isBlank() ? GpuRuntime.load(platform, Path.of(library))
                : GpuRuntime.load(platform);
    }

    /**
     * Checks that {@code runtime} sees both GPUs.
     *
     * @throws IllegalStateException naming the GPUs the runtime sees and the options that choose others
     */
    static void checkDevices(String backend, GpuRuntime runtime, int prefill, int decode) {
        int devices = runtime.deviceCount();
        if (Math.max(prefill, decode) >= devices) {
            throw new IllegalStateException("the " + backend + " backend writes from GPU " + prefill + " into GPU "
                    + decode + ", but the " + runtime.platform().prefix() + " runtime sees " + devices
                    + (devices == 1 ? " GPU (GPU 0)" : " GPUs (0 to " + (devices - 1) + ")")
                    + "; choose others with --gpu and --decode-gpu");
        }
    }

    /** {@code platform}'s runtime if given, else the one {@link GpuRuntime#load()} finds (CUDA, then HIP). */
    static GpuRuntime load(Optional<GpuPlatform> platform) {
        return platform.map(GpuRuntimes::load).orElseGet(GpuRuntime::load);
    }
}
