package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.mori.internal.MoriNative;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A native handle that lives on an engine: closing it releases it once; after its engine was closed
 * (which released it natively) closing it does nothing.
 */
abstract class EngineHandle implements AutoCloseable {
    final MoriNative lib;
    final MoriEngine engine;
    final long handle;
    private final AtomicBoolean closed = new AtomicBoolean();

    EngineHandle(MoriNative lib, MoriEngine engine, long handle) {
        this.lib = lib;
        this.engine = engine;
        this.handle = handle;
    }

    /** Releases the native handle. Idempotent; a no-op once the engine is closed. */
    @Override
    public final void close() {
        if (closed.compareAndSet(false, true)) {
            if (!engine.isClosed()) {
                release();
            }
        }
    }

    final boolean isClosed() {
        return closed.get();
    }

    final long handle() {
        return handle;
    }

    abstract void release();
}
