package dev.kvflux.bindings.mori.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Zeroed host buffers from the C library's {@code calloc}: large buffers are mapped lazily, so a
 * 1 GiB registration costs memory only for the pages a copy touches. Freed with {@link #free}.
 */
public final class HostMemory {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle CALLOC = LINKER.downcallHandle(
            LINKER.defaultLookup().find("calloc").orElseThrow(), FunctionDescriptor.of(ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle FREE = LINKER.downcallHandle(
            LINKER.defaultLookup().find("free").orElseThrow(), FunctionDescriptor.ofVoid(ADDRESS));

    private HostMemory() {
    }

    /**
     * {@code size} zeroed bytes.
     *
     * @throws OutOfMemoryError if the C library has no memory for them
     */
    public static MemorySegment allocate(long size) {
        if (size <= 0) {
            throw new IllegalArgumentException("host buffer size must be positive, got " + size);
        }
        MemorySegment raw;
        try {
            raw = (MemorySegment) CALLOC.invokeExact(1L, size);
        } catch (Throwable t) {
            throw MoriNative.rethrow(t);
        }
        if (raw.equals(MemorySegment.NULL)) {
            throw new OutOfMemoryError("calloc could not allocate a host buffer of " + size + " bytes");
        }
        return raw.reinterpret(size);
    }

    /** Frees a buffer from {@link #allocate}. */
    public static void free(MemorySegment buffer) {
        try {
            FREE.invokeExact(buffer);
        } catch (Throwable t) {
            throw MoriNative.rethrow(t);
        }
    }
}
