package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Host functions on streams, through one FFM upcall stub for the whole process. The stream's runtime
 * thread calls the stub with a key; the stub only looks the callback up and hands it to a dedicated
 * daemon thread, because a host function must neither call the runtime nor hold its stream long.
 */
final class HostFunctions {
    private static final Map<Long, Runnable> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong KEYS = new AtomicLong(1);
    private static final ExecutorService DISPATCH = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "kvflux-gpu-host-functions");
        t.setDaemon(true);
        return t;
    });
    private static final MemorySegment STUB = stub();

    private HostFunctions() {
    }

    static void launch(GpuRuntime runtime, GpuStream stream, Runnable callback) {
        long key = KEYS.getAndIncrement();
        PENDING.put(key, callback);
        int code = runtime.calls().launchHostFunc(stream.handle(), STUB, key);
        if (code != RuntimeCalls.SUCCESS) {
            PENDING.remove(key);
            throw runtime.failure(code, "LaunchHostFunc");
        }
    }

    /** The upcall target: runs on the runtime's thread, so it must not throw and must not block. */
    @SuppressWarnings("unused")
    private static void onHostFunction(MemorySegment userData) {
        try {
            Runnable callback = PENDING.remove(userData.address());
            if (callback != null) {
                DISPATCH.execute(callback);
            }
        } catch (Throwable ignored) {
            // Nothing may unwind into the runtime's thread; a lost callback leaves its status to polling.
        }
    }

    private static MemorySegment stub() {
        try {
            var target = MethodHandles.lookup().findStatic(HostFunctions.class, "onHostFunction",
                    MethodType.methodType(void.class, MemorySegment.class));
            return RuntimeCalls.hostFunctionStub(target, Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
