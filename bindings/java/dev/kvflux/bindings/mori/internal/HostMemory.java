package dev.kvflux.bindings.mori.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvflux.bindings.internal.Downcalls;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Zeroed host buffers mapped straight from the kernel ({@code mmap}, anonymous and private): pages are
 * backed lazily, so a 1 GiB registration costs memory only for the pages that are touched, and
 * {@link #free} gives them back to the kernel at once.
 */
public final class HostMemory {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle MMAP = libc("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = libc("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
    private static final int PROT_READ_WRITE = 0x1 | 0x2;
    private static final int MAP_PRIVATE_ANONYMOUS = 0x02 | 0x20;

    private HostMemory() {
    }

    private static MethodHandle libc(String name, FunctionDescriptor fn) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
                () -> new UnsupportedOperationException("the C library has no " + name + "; host buffers need Linux")), fn);
    }

    /**
     * {@code size} zeroed bytes.
     *
     * @throws OutOfMemoryError if the kernel refuses the mapping
     */
    public static MemorySegment allocate(long size) {
        if (size <= 0) {
            throw new IllegalArgumentException("host buffer size must be positive, got " + size);
        }
        try {
            MemorySegment raw = (MemorySegment) MMAP.invokeExact(MemorySegment.NULL, size, PROT_READ_WRITE,
                    MAP_PRIVATE_ANONYMOUS, -1, 0L);
            if (raw.address() == -1L || raw.equals(MemorySegment.NULL)) {
                throw new OutOfMemoryError("mmap could not map a host buffer of " + size + " bytes");
            }
            return raw.reinterpret(size);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    /** Unmaps a buffer from {@link #allocate}. */
    public static void free(MemorySegment buffer) {
        try {
            int rc = (int) MUNMAP.invokeExact(buffer, buffer.byteSize());
            if (rc != 0) {
                throw new IllegalStateException("munmap of a " + buffer.byteSize() + "-byte host buffer failed");
            }
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }
}
