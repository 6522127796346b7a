package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A non-blocking stream. Posting calls return at once; the work runs in stream order. Posting from
 * several threads is safe, but work that must stay contiguous on the stream needs the caller's lock.
 */
public final class GpuStream implements AutoCloseable {
    private final GpuRuntime runtime;
    private final long handle;
    private final int device;
    private final AtomicBoolean closed = new AtomicBoolean();

    GpuStream(GpuRuntime runtime, long handle, int device) {
        this.runtime = runtime;
        this.handle = handle;
        this.device = device;
    }

    public int device() {
        return device;
    }

    long handle() {
        return handle;
    }

    /** Queues a fill of {@code size} bytes at device address {@code address} with {@code value}. */
    public void memsetAsync(long address, int value, long size) {
        runtime.check(runtime.calls().memsetAsync(address, value, size, handle), "MemsetAsync");
    }

    /** Queues a copy between device addresses (unified addressing picks the direction). */
    public void copyAsync(long dst, long src, long size) {
        runtime.check(runtime.calls().memcpyAsync(dst, src, size, RuntimeCalls.MEMCPY_DEFAULT, handle),
                "MemcpyAsync");
    }

    /** Queues a copy from {@code srcDevice}'s memory to {@code dstDevice}'s. */
    public void copyPeerAsync(long dst, int dstDevice, long src, int srcDevice, long size) {
        runtime.check(runtime.calls().memcpyPeerAsync(dst, dstDevice, src, srcDevice, size, handle),
                "MemcpyPeerAsync");
    }

    /** Makes later work on this stream wait until {@code event} completes, without blocking the host. */
    public void waitEvent(GpuEvent event) {
        runtime.check(runtime.calls().streamWaitEvent(handle, event.handle(), 0), "StreamWaitEvent");
    }

    /**
     * Queues {@code callback} to run once all earlier work on this stream is done. The runtime's own
     * thread only hands it over: {@code callback} runs on kvflux's host-function thread, where it may
     * call the runtime (the runtime forbids that inside a host function itself). That one thread serves
     * every stream of the process, so {@code callback} must be short. If the stream closes before the
     * host function runs (a device fault can stop it for good), {@code callback} is dropped, never run.
     */
    public void launchHostFunction(Runnable callback) {
        HostFunctions.launch(runtime, this, callback);
    }

    /** Blocks until all work queued on this stream is done. */
    public void synchronize() {
        runtime.check(runtime.calls().streamSynchronize(handle), "StreamSynchronize");
    }

    /** Destroys the stream and drops the callbacks of its host functions that have not run. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                runtime.check(runtime.calls().streamDestroy(handle), "StreamDestroy");
            } finally {
                HostFunctions.forget(this);
            }
        }
    }
}
