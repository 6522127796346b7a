package dev.kvflux.bindings.gpu;

import static java.lang.foreign.ValueLayout.ADDRESS;

import dev.kvflux.bindings.gpu.internal.DriverCalls;
import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.ToIntFunction;

/**
 * The CUDA driver API ({@code libcuda.so.1}), bound through FFM for what the runtime API cannot do from
 * Java: load a PTX module and launch its kernel. kvflux uses it for the scatter/gather copy path only;
 * everything else goes through {@link GpuRuntime}. Thread-safe, as the driver is.
 *
 * <p>Every call's {@code CUresult} goes through one checker: a failure throws {@link GpuException} naming
 * the driver's error ({@code CUDA_ERROR_INVALID_PTX}), the call, and what to do. A driver library that
 * cannot be loaded throws {@link GpuLibraryNotFoundException} saying where it was looked for.
 */
public final class CudaDriver {

    /** A path to {@code libcuda.so.1}, overriding the search. */
    public static final String LIBRARY_PROPERTY = "kvflux.gpu.driver-library";

    private static final List<String> CANDIDATES = List.of("libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.1");

    private final DriverCalls calls;

    private CudaDriver(DriverCalls calls) {
        this.calls = calls;
    }

    /**
     * The driver from {@value #LIBRARY_PROPERTY} if set, else the first of {@code libcuda.so.1} (the dynamic
     * loader's search), {@code /usr/lib/x86_64-linux-gnu}, {@code /usr/local/nvidia/lib64}, {@code /usr/lib64}
     * that loads, initialized ({@code cuInit}).
     *
     * @throws GpuLibraryNotFoundException if none loads
     * @throws GpuException if {@code cuInit} fails
     */
    public static CudaDriver load() {
        String path = System.getProperty(LIBRARY_PROPERTY);
        return path != null && !path.isBlank() ? loadFirst(List.of(Path.of(path)))
                : loadFirst(CANDIDATES.stream().map(Path::of).toList());
    }

    static CudaDriver loadFirst(List<Path> candidates) {
        List<String> tried = new ArrayList<>();
        for (Path candidate : candidates) {
            if (candidate.getParent() != null && !Files.exists(candidate)) {
                tried.add(candidate + ": no such file");
                continue;
            }
            DriverCalls calls;
            try {
                calls = DriverCalls.bind(candidate);
            } catch (IllegalArgumentException notLoadable) {
                tried.add(candidate + ": " + notLoadable.getMessage());
                continue;
            } catch (RuntimeCalls.MissingSymbolException wrongLibrary) {
                tried.add(wrongLibrary.getMessage());
                continue;
            }
            CudaDriver driver = new CudaDriver(calls);
            driver.check(calls.init(0), "cuInit");
            return driver;
        }
        throw GpuLibraryNotFoundException.cudaDriver("tried " + String.join("; ", tried));
    }

    /** The library file the driver was loaded from (or the bare name the loader resolved). */
    public Path library() {
        return calls.library();
    }

    DriverCalls calls() {
        return calls;
    }

    /** The one checker: a non-zero {@code CUresult} becomes a {@link GpuException} naming the driver's error. */
    void check(int code, String call) {
        if (code != DriverCalls.SUCCESS) {
            String name = calls.errorName(code);
            throw new GpuException(code, name != null ? name : "CUresult " + code, calls.errorString(code), call);
        }
    }

    /** A handle the call writes through its pointer argument. */
    long handleOut(String call, ToIntFunction<MemorySegment> body) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check(body.applyAsInt(out), call);
            return out.get(ADDRESS, 0).address();
        }
    }

    @Override
    public String toString() {
        return "CudaDriver[" + calls.library() + "]";
    }
}
