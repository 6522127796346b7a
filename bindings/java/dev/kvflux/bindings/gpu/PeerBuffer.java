package dev.kvflux.bindings.gpu;

import java.util.concurrent.atomic.AtomicBoolean;

/** Another process's device buffer, mapped here through its IPC handle; {@link #close()} unmaps it. */
public final class PeerBuffer implements AutoCloseable {
    private final GpuRuntime runtime;
    private final long address;
    private final long size;
    private final int device;
    private final AtomicBoolean closed = new AtomicBoolean();

    PeerBuffer(GpuRuntime runtime, long address, long size, int device) {
        this.runtime = runtime;
        this.address = address;
        this.size = size;
        this.device = device;
    }

    /** The mapped address, valid in this process on {@link #device()}. */
    public long address() {
        return address;
    }

    public long size() {
        return size;
    }

    /** The device this process opened the handle on (not the device the memory lives on). */
    public int device() {
        return device;
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            runtime.setDevice(device);
            runtime.check(runtime.calls().ipcCloseMemHandle(address), "IpcCloseMemHandle");
        }
    }
}
