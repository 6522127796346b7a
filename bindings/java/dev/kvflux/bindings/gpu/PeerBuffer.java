package dev.kvflux.bindings.gpu;

/**
 * Another process's device buffer, mapped here through its IPC handle; {@link #close()} unmaps it (once).
 * Its {@link #device()} is the device this process opened the handle on, not the one the memory lives on.
 */
public final class PeerBuffer extends DeviceMemory {

    PeerBuffer(GpuRuntime runtime, long address, long size, int device) {
        super(runtime, address, size, device);
    }

    @Override
    void release(GpuRuntime runtime, long address) {
        runtime.check(runtime.calls().ipcCloseMemHandle(address), "IpcCloseMemHandle");
    }
}
