package dev.kvflux.bindings.gpu;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A range of device memory this process can address: memory it allocated ({@link DeviceBuffer}) or
 * another process's memory mapped through an IPC handle ({@link PeerBuffer}). {@link #close()} releases
 * it once, on its device; later calls do nothing.
 */
public abstract sealed class DeviceMemory implements AutoCloseable permits DeviceBuffer, PeerBuffer {
    private final GpuRuntime runtime;
    private final long address;
    private final long size;
    private final int device;
    private final AtomicBoolean closed = new AtomicBoolean();

    DeviceMemory(GpuRuntime runtime, long address, long size, int device) {
        this.runtime = runtime;
        this.address = address;
        this.size = size;
        this.device = device;
    }

    /** The device address, valid in this process on {@link #device()} (not dereferenceable from the host). */
    public long address() {
        return address;
    }

    public long size() {
        return size;
    }

    /** The device this process uses the memory from. */
    public int device() {
        return device;
    }

    @Override
    public final void close() {
        if (closed.compareAndSet(false, true)) {
            runtime.setDevice(device);
            release(runtime, address);
        }
    }

    /** The runtime call that gives the memory back, checked. */
    abstract void release(GpuRuntime runtime, long address);
}
