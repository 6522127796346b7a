package dev.kvflux.bindings.gpu;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The GPU runtime a {@link GpuRuntime} binds: AMD's HIP ({@code libamdhip64}, symbols {@code hip…}) or
 * NVIDIA's CUDA runtime ({@code libcudart}, symbols {@code cuda…}). Both expose the same ABI for every
 * call kvflux makes, so one binding serves both; only the library and the prefix differ.
 */
public enum GpuPlatform {
    HIP("hip", "libamdhip64.so", "ROCM_PATH", "lib",
            List.of("/opt/rocm/lib/libamdhip64.so"),
            List.of("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"),
            "install the HIP runtime: Debian/Ubuntu package libamdhip64-5 (apt-get install libamdhip64-5)"
                    + " or ROCm (/opt/rocm/lib)"),
    CUDA("cuda", "libcudart.so", "CUDA_HOME", "lib64",
            List.of("/usr/local/cuda/lib64/libcudart.so", "/usr/local/cuda/lib/libcudart.so"),
            List.of("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"),
            "install the CUDA toolkit (its runtime is /usr/local/cuda/lib64/libcudart.so) or the"
                    + " cuda-cudart package of your distribution");

    private final String prefix;
    private final String libraryName;
    private final String homeVariable;
    private final String homeLibDir;
    private final List<String> standardPaths;
    private final List<String> loaderNames;
    private final String installAdvice;

    GpuPlatform(String prefix, String libraryName, String homeVariable, String homeLibDir,
            List<String> standardPaths, List<String> loaderNames, String installAdvice) {
        this.prefix = prefix;
        this.libraryName = libraryName;
        this.homeVariable = homeVariable;
        this.homeLibDir = homeLibDir;
        this.standardPaths = standardPaths;
        this.loaderNames = loaderNames;
        this.installAdvice = installAdvice;
    }

    /** The symbol prefix, {@code hip} or {@code cuda}; also the backend name reports print. */
    public String prefix() {
        return prefix;
    }

    /** The library's file name, {@code libamdhip64.so} or {@code libcudart.so}. */
    public String libraryName() {
        return libraryName;
    }

    /** What to install when the library is missing. */
    public String installAdvice() {
        return installAdvice;
    }

    /**
     * Where to look, in order: under {@code $ROCM_PATH} / {@code $CUDA_HOME}, the standard install
     * paths, then bare names the dynamic loader resolves through its own search path.
     */
    public List<Path> candidates() {
        List<Path> paths = new ArrayList<>();
        String home = System.getenv(homeVariable);
        if (home != null && !home.isBlank()) {
            paths.add(Path.of(home, homeLibDir, libraryName));
        }
        standardPaths.forEach(p -> paths.add(Path.of(p)));
        loaderNames.forEach(n -> paths.add(Path.of(n)));
        return paths;
    }

    /**
     * The platform named {@code hip} or {@code cuda}, in any case.
     *
     * @throws IllegalArgumentException for any other name
     */
    public static GpuPlatform named(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (GpuPlatform p : values()) {
            if (p.prefix.equals(n)) {
                return p;
            }
        }
        throw new IllegalArgumentException("unknown GPU runtime '" + name
                + "': use hip (AMD, libamdhip64.so) or cuda (NVIDIA, libcudart.so)");
    }
}
