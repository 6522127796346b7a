package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A runtime event: recorded on a stream, it completes when the stream reaches it. {@link #query()} is
 * the non-blocking check, linked critical; as a {@link LayerEvent} it is the polled layer event.
 */
public final class GpuEvent implements LayerEvent, AutoCloseable {
    private final GpuRuntime runtime;
    private final long handle;
    private final int device;
    private final boolean timing;
    private final AtomicBoolean closed = new AtomicBoolean();

    GpuEvent(GpuRuntime runtime, long handle, int device, boolean timing) {
        this.runtime = runtime;
        this.handle = handle;
        this.device = device;
        this.timing = timing;
    }

    public int device() {
        return device;
    }

    /** Whether this event records time ({@link #elapsedMillisSince} needs it on both ends). */
    public boolean timing() {
        return timing;
    }

    long handle() {
        return handle;
    }

    /** Records this event at the current end of {@code stream}. */
    public void record(GpuStream stream) {
        runtime.check(runtime.calls().eventRecord(handle, stream.handle()), "EventRecord");
    }

    /**
     * {@link EventState#READY} once the work before the record is done, else
     * {@link EventState#NOT_READY}; never blocks.
     *
     * @throws GpuException if that work failed
     */
    @Override
    public EventState query() {
        int code = runtime.calls().eventQuery(handle);
        if (code == RuntimeCalls.SUCCESS) {
            return EventState.READY;
        }
        if (code == RuntimeCalls.NOT_READY) {
            return EventState.NOT_READY;
        }
        throw runtime.failure(code, "EventQuery");
    }

    /** Blocks until the event completes. */
    public void synchronize() {
        runtime.check(runtime.calls().eventSynchronize(handle), "EventSynchronize");
    }

    /** Milliseconds from {@code start} to this event; both must have completed and record timing. */
    public float elapsedMillisSince(GpuEvent start) {
        return runtime.floatOut("EventElapsedTime",
                out -> runtime.calls().eventElapsedTime(out, start.handle(), handle));
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            runtime.check(runtime.calls().eventDestroy(handle), "EventDestroy");
        }
    }
}
