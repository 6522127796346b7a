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
import java.util.function.LongConsumer;

/**
 * Host functions on streams, through one FFM upcall stub for the whole process. The stream's runtime
 * thread calls the stub with a key; the stub only looks the callback up and hands it to a dedicated
 * daemon thread, because a host function must neither call the runtime nor hold its stream long.
 *
 * <h2>The dispatch thread</h2>
 * Every callback of the process runs on the one thread {@code kvflux-gpu-host-functions}, in the order
 * their host functions ran, so a callback must be short: it settles a status or completes a sink, and
 * whoever waits on that hands the signal to its own scheduler (as {@code PushWait} does) rather than
 * working on this thread.
 *
 * <h2>How long a callback is kept</h2>
 * A callback waits in a table until its host function runs. A host function may never run (a device
 * fault that stops the stream, a stream destroyed with work still queued), so an entry also leaves the
 * table, without running, when
 * <ul>
 *   <li>its owner cancels it ({@link #cancel}): a batch status does so once it is settled some other way,
 *       by a query that found its event done or failed, or by a failure;</li>
 *   <li>its stream closes ({@link #forget}): what has not run by then is dropped, and the status it would
 *       have pushed is settled by a query, as a polled status is.</li>
 * </ul>
 * So the table holds at most the host functions of open streams whose statuses are still in flight.
 */
final class HostFunctions {
    private record Pending(Object stream, LongConsumer callback) {
    }

    private static final Map<Long, Pending> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong KEYS = new AtomicLong(1);
    private static final ExecutorService DISPATCH = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "kvflux-gpu-host-functions");
        t.setDaemon(true);
        return t;
    });
    private static final MemorySegment STUB = stub();

    private HostFunctions() {
    }

    /**
     * Queues {@code callback} behind the work on {@code stream}.
     *
     * @return the key that {@link #cancel} takes
     * @throws GpuException if the runtime refuses the host function (nothing is kept then)
     */
    static long launch(GpuRuntime runtime, GpuStream stream, Runnable callback) {
        return launchTimed(runtime, stream, ranAt -> callback.run());
    }

    /**
     * Queues {@code callback} behind the work on {@code stream}; it is given the {@link System#nanoTime()}
     * at which the host function ran on the runtime's thread, that is when the stream had passed all earlier
     * work, before the hand-over to the dispatch thread.
     *
     * @return the key that {@link #cancel} takes
     * @throws GpuException if the runtime refuses the host function (nothing is kept then)
     */
    static long launchTimed(GpuRuntime runtime, GpuStream stream, LongConsumer callback) {
        long key = registerTimed(stream, callback);
        int code = runtime.calls().launchHostFunc(stream.handle(), STUB, key);
        if (code != RuntimeCalls.SUCCESS) {
            cancel(key);
            throw runtime.failure(code, "LaunchHostFunc");
        }
        return key;
    }

    /** Keeps {@code callback} for the host function with the returned key, on behalf of {@code stream}. */
    static long register(Object stream, Runnable callback) {
        return registerTimed(stream, ranAt -> callback.run());
    }

    /** Keeps {@code callback}, given the time its host function ran, on behalf of {@code stream}. */
    static long registerTimed(Object stream, LongConsumer callback) {
        long key = KEYS.getAndIncrement();
        PENDING.put(key, new Pending(stream, callback));
        return key;
    }

    /** Drops the callback with {@code key} unless it has run already; its host function then does nothing. */
    static void cancel(long key) {
        PENDING.remove(key);
    }

    /** Drops every callback of {@code stream} that has not run: the stream is closing. */
    static void forget(Object stream) {
        PENDING.values().removeIf(p -> p.stream() == stream);
    }

    /** What the host function with {@code key} does: hands its callback, if still kept, to the dispatch thread. */
    static void dispatch(long key) {
        long ranAt = System.nanoTime();
        Pending pending = PENDING.remove(key);
        if (pending != null) {
            LongConsumer callback = pending.callback();
            DISPATCH.execute(() -> callback.accept(ranAt));
        }
    }

    /** The upcall target: runs on the runtime's thread, so it must not throw and must not block. */
    @SuppressWarnings("unused")
    private static void onHostFunction(MemorySegment userData) {
        try {
            dispatch(userData.address());
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
