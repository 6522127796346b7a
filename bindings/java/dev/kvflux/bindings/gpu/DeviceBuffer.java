package dev.kvflux.bindings.gpu;

/** Device memory this process allocated; {@link #close()} frees it (once). */
public final class DeviceBuffer extends DeviceMemory {

    DeviceBuffer(GpuRuntime runtime, long address, long size, int device) {
        super(runtime, address, size, device);
    }

    @Override
    void release(GpuRuntime runtime, long address) {
        runtime.check(runtime.calls().free(address), "Free");
    }
}
