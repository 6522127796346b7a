package dev.kvflux.bindings.gpu;

import java.util.concurrent.atomic.AtomicBoolean;

/** Device memory this process allocated; {@link #close()} frees it (once). */
public final class DeviceBuffer implements AutoCloseable {
    private final GpuRuntime runtime;
    private final long address;
    private final long size;
    private final int device;
    private final AtomicBoolean closed = new AtomicBoolean();

    DeviceBuffer(GpuRuntime runtime, long address, long size, int device) {
        this.runtime = runtime;
        this.address = address;
        this.size = size;
        this.device = device;
    }

    /** The device address (not dereferenceable from the host). */
    public long address() {
        return address;
    }

    public long size() {
        return size;
    }

    public int device() {
        return device;
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            runtime.setDevice(device);
            runtime.check(runtime.calls().free(address), "Free");
        }
    }
}
