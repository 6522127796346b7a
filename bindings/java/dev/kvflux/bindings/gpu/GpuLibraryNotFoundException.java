package dev.kvflux.bindings.gpu;

/**
 * The GPU runtime library could not be loaded. The message names the library, where it was looked for,
 * and the package that provides it.
 */
public final class GpuLibraryNotFoundException extends RuntimeException {
    private final GpuPlatform platform;

    GpuLibraryNotFoundException(GpuPlatform platform, String detail) {
        super("the " + platform.prefix().toUpperCase(java.util.Locale.ROOT) + " runtime library "
                + platform.libraryName() + " could not be loaded (" + detail + "); "
                + platform.installAdvice() + ", or point -D" + GpuRuntime.LIBRARY_PROPERTY
                + " at the library file");
        this.platform = platform;
    }

    private GpuLibraryNotFoundException(String message) {
        super(message);
        this.platform = GpuPlatform.CUDA;
    }

    /** The CUDA driver library ({@code libcuda.so.1}), which the scatter/gather copy path needs, is missing. */
    static GpuLibraryNotFoundException cudaDriver(String detail) {
        return new GpuLibraryNotFoundException("the CUDA driver library libcuda.so.1 could not be loaded (" + detail
                + "); the scatter/gather copy path launches its kernel through the driver API: install the NVIDIA"
                + " driver (it brings libcuda.so.1; Debian: libcuda1), or point -D" + CudaDriver.LIBRARY_PROPERTY
                + " at libcuda.so.1, or leave the scatter/gather threshold unset to copy with one memcpy per block");
    }

    public GpuPlatform platform() {
        return platform;
    }
}
