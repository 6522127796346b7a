package dev.kvflux.bindings.gpu.internal;

import static dev.kvflux.bindings.internal.Downcalls.call;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvflux.bindings.internal.Downcalls;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

/**
 * Raw downcalls into the CUDA driver API ({@code libcuda.so.1}, installed with the NVIDIA driver): the
 * few calls that load a PTX module and launch one of its kernels. Every method returns the driver's own
 * {@code CUresult}, unchecked: the public {@code CudaDriver} checks each one.
 *
 * <p>Handles ({@code CUmodule}, {@code CUfunction}, {@code CUstream}) travel as {@code long} addresses; a
 * runtime API stream is a valid {@code CUstream}. Out-parameters are segments the caller allocates.
 */
public final class DriverCalls {

    /** {@code CUDA_SUCCESS}. */
    public static final int SUCCESS = 0;

    private final Path library;
    private final MethodHandle init;
    private final MethodHandle getErrorName;
    private final MethodHandle getErrorString;
    private final MethodHandle moduleLoadData;
    private final MethodHandle moduleUnload;
    private final MethodHandle moduleGetFunction;
    private final MethodHandle launchKernel;

    private DriverCalls(Path library, SymbolLookup symbols) {
        this.library = library;
        init = bind(symbols, "cuInit", JAVA_INT, JAVA_INT);
        getErrorName = bind(symbols, "cuGetErrorName", JAVA_INT, JAVA_INT, ADDRESS);
        getErrorString = bind(symbols, "cuGetErrorString", JAVA_INT, JAVA_INT, ADDRESS);
        moduleLoadData = bind(symbols, "cuModuleLoadData", JAVA_INT, ADDRESS, ADDRESS);
        moduleUnload = bind(symbols, "cuModuleUnload", JAVA_INT, JAVA_LONG);
        moduleGetFunction = bind(symbols, "cuModuleGetFunction", JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS);
        launchKernel = bind(symbols, "cuLaunchKernel", JAVA_INT, JAVA_LONG,
                JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS);
    }

    /**
     * Binds the calls from {@code library} (a path, or a bare name such as {@code libcuda.so.1} that the
     * dynamic loader resolves).
     *
     * @throws IllegalArgumentException if the library cannot be loaded (as {@link SymbolLookup#libraryLookup})
     * @throws RuntimeCalls.MissingSymbolException if a call is missing from it
     */
    public static DriverCalls bind(Path library) {
        SymbolLookup symbols = library.getParent() == null
                ? SymbolLookup.libraryLookup(library.toString(), Arena.global())
                : SymbolLookup.libraryLookup(library, Arena.global());
        return new DriverCalls(library, symbols);
    }

    public Path library() {
        return library;
    }

    public int init(int flags) {
        return call(() -> (int) init.invokeExact(flags));
    }

    /** The driver's name for {@code code}, {@code CUDA_ERROR_INVALID_PTX}; null if it knows none. */
    public String errorName(int code) {
        return string(getErrorName, code);
    }

    /** The driver's description of {@code code}; null if it knows none. */
    public String errorString(int code) {
        return string(getErrorString, code);
    }

    /** Loads a NUL-terminated PTX (or cubin) image into the calling thread's current context. */
    public int moduleLoadData(MemorySegment module, MemorySegment image) {
        return call(() -> (int) moduleLoadData.invokeExact(module, image));
    }

    public int moduleUnload(long module) {
        return call(() -> (int) moduleUnload.invokeExact(module));
    }

    public int moduleGetFunction(MemorySegment function, long module, MemorySegment name) {
        return call(() -> (int) moduleGetFunction.invokeExact(function, module, name));
    }

    /** {@code cuLaunchKernel}: {@code params} is an array of pointers to each argument's value. */
    public int launchKernel(long function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
            int sharedBytes, long stream, MemorySegment params) {
        return call(() -> (int) launchKernel.invokeExact(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                sharedBytes, stream, params, MemorySegment.NULL));
    }

    private static String string(MethodHandle call, int code) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            int result = (int) call.invokeExact(code, out);
            MemorySegment text = out.get(ADDRESS, 0);
            return result != SUCCESS || text.equals(MemorySegment.NULL) ? null : text.reinterpret(4096).getString(0);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    private MethodHandle bind(SymbolLookup symbols, String name, MemoryLayout result, MemoryLayout... args) {
        MemorySegment symbol = symbols.find(name).orElseThrow(() -> new RuntimeCalls.MissingSymbolException(
                library + " does not export " + name + "; it is not a CUDA driver kvflux can use (CUDA 11 or newer)"));
        return Linker.nativeLinker().downcallHandle(symbol, FunctionDescriptor.of(result, args));
    }
}
