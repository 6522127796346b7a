package dev.kvflux.bindings.gpu;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;

/**
 * Room for one batch's scatter/gather metadata: page-locked host memory the posting thread writes, and a
 * device buffer the stream uploads it to before the kernel reads it. A slot belongs to one batch from its
 * posting until its status completes, so neither side is overwritten while the GPU may still read it.
 */
final class MetadataSlot implements AutoCloseable {
    private final GpuRuntime runtime;
    private final int capacity;
    private final long host;
    private final DeviceBuffer device;

    MetadataSlot(GpuRuntime runtime, int device, int capacity) {
        this.runtime = runtime;
        this.capacity = capacity;
        this.host = runtime.allocatePinned(bytes(capacity));
        try {
            // Not zeroed: a zeroing memset on the legacy stream could land after the upload on ours.
            this.device = runtime.allocateUninitialized(device, bytes(capacity));
        } catch (RuntimeException e) {
            runtime.freePinned(host);
            throw e;
        }
    }

    private static long bytes(int segments) {
        return 3L * segments * Long.BYTES;
    }

    /** How many segments' metadata fits. */
    int capacity() {
        return capacity;
    }

    /** The device copy's address, which the kernel reads. */
    long deviceAddress() {
        return device.address();
    }

    /** Writes {@code meta} into the host side and queues its upload on {@code stream}. */
    void upload(long[] meta, GpuStream stream) {
        MemorySegment pinned = MemorySegment.ofAddress(host).reinterpret(bytes(capacity));
        MemorySegment.copy(meta, 0, pinned, JAVA_LONG, 0, meta.length);
        stream.copyAsync(device.address(), host, (long) meta.length * Long.BYTES);
    }

    @Override
    public void close() {
        try {
            device.close();
        } finally {
            runtime.freePinned(host);
        }
    }
}
