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

    public GpuPlatform platform() {
        return platform;
    }
}
