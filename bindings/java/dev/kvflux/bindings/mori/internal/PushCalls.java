package dev.kvflux.bindings.mori.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kvflux.bindings.internal.Downcalls;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Push completion in one loaded library ({@code kvflux_mori_engine_set_push}, {@code kvflux_mori_push_take},
 * {@code kvflux_mori_status_copy_end_ns}), and the one notification thread of the process that takes the
 * pushes and hands each to the status waiting for it. Where the library has {@code kvflux_mori_push_take_stages}
 * the thread takes the pushes with their stages, and hands those on too.
 *
 * <h2>The notification thread</h2>
 * {@code kvflux-mori-push}, a daemon thread started with the first status that waits for a push, blocks in
 * {@code kvflux_mori_push_take} (up to 100 ms a call, 256 completions at most) and calls each completion's
 * {@link Target} in the order the library completed them. A target must be short: it settles a status, and
 * whoever waits on that hands the signal to a scheduler of its own. A push for a status nobody waits for
 * (released, or posted by an engine that pushes and never waited for) is dropped.
 */
public final class PushCalls {
    /** The library's {@code KVFLUX_MORI_PUSH_*} modes. */
    public static final int OFF = 0;
    public static final int TIMES = 1;
    public static final int ON = 2;

    /** Completions taken per call, and how long one call waits when none is queued. */
    static final int BATCH = 256;
    static final int TAKE_TIMEOUT_MS = 100;

    /** {@code kvflux_mori_push}: status handle, code, reserved, copy end. */
    private static final long ENTRY_BYTES = 24;
    /** {@code kvflux_mori_push_stages}: a push, then signalled, queued and taken. */
    private static final long STAGED_ENTRY_BYTES = ENTRY_BYTES + 24;
    private static final String CALL_TAKE = "kvflux_mori_push_take";
    /** The ABI's bad-state code: the copies have not ended, or the library cannot tell when they did. */
    private static final int E_BAD_STATE = -7;
    /** The ABI's bad-handle code: the status was released. */
    private static final int E_BAD_HANDLE = -2;
    /** MoRI's ERR_BAD_STATE: what a status still waiting for its push ends with when its engine is destroyed. */
    private static final int STATUS_ERR_BAD_STATE = 14;

    /** Who waits for a status's push. */
    public interface Target {
        /**
         * The status became terminal with {@code code}; its copies ended at {@code copyEndNanos}
         * ({@link System#nanoTime()}'s clock), 0 when the library does not know when. {@code stages}: the
         * library's stages of this push and when the notification thread was back in Java with it (read it before
         * returning: it is reused), or null when no push settles the status (its engine was destroyed).
         */
        void pushed(int code, long copyEndNanos, Stages stages);
    }

    /**
     * The stages of one push as the library tells them ({@code kvflux_mori_push_stages}), on
     * {@link System#nanoTime()}'s clock, 0 where it does not; and when the notification thread was back in Java.
     * One instance per notification thread, filled again for every push: it allocates nothing.
     */
    public static final class Stages {
        long signalled;
        long queued;
        long taken;
        long returned;

        public long signalled() {
            return signalled;
        }

        public long queued() {
            return queued;
        }

        public long taken() {
            return taken;
        }

        public long returned() {
            return returned;
        }
    }

    private final MoriNative lib;
    private final MethodHandle setPush;
    private final MethodHandle take;
    private final MethodHandle takeStages;
    private final MethodHandle copyEnd;
    private record Waiter(long engine, Target target) {
    }

    private final Map<Long, Waiter> waiting = new ConcurrentHashMap<>();
    private volatile Thread notifier;

    private PushCalls(MoriNative lib, MethodHandle setPush, MethodHandle take, MethodHandle takeStages,
                      MethodHandle copyEnd) {
        this.lib = lib;
        this.setPush = setPush;
        this.take = take;
        this.takeStages = takeStages;
        this.copyEnd = copyEnd;
    }

    /** The calls if the library has all three, else null (a library built before push completion). */
    static PushCalls bindIfPresent(SymbolLookup lookup, MoriNative lib) {
        MethodHandle set = MoriNative.bindOptional(lookup, "kvflux_mori_engine_set_push",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT));
        FunctionDescriptor takes = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS);
        MethodHandle take = MoriNative.bindOptional(lookup, CALL_TAKE, takes);
        MethodHandle takeStages = MoriNative.bindOptional(lookup, "kvflux_mori_push_take_stages", takes);
        // not critical: the shim takes a status's lock, which its notifier holds across a GPU query
        MethodHandle end = MoriNative.bindOptional(lookup, "kvflux_mori_status_copy_end_ns",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS));
        return set == null || take == null || end == null ? null
                : new PushCalls(lib, set, take, takeStages, end);
    }

    /**
     * Sets what {@code engine} does with the batches it posts from now on ({@link #OFF}, {@link #TIMES},
     * {@link #ON}).
     *
     * @throws dev.kvflux.bindings.mori.MoriIoException {@code KVFLUX_MORI_E_UNSUPPORTED} when the library cannot
     *     tell when copies end (a MoRI without kvflux's patch)
     */
    public void setPush(long engine, int mode) {
        try {
            lib.check((int) setPush.invokeExact(engine, mode), "kvflux_mori_engine_set_push");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    /**
     * When {@code status}'s copies ended ({@link System#nanoTime()}'s clock), or {@link Long#MIN_VALUE} while
     * they have not, when the status failed, or when the library cannot tell. Never blocks; never throws for
     * a status still open.
     */
    public long copyEndNanos(long status) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int rc = (int) copyEnd.invokeExact(status, out);
            if (rc == E_BAD_STATE || rc == E_BAD_HANDLE) {
                return Long.MIN_VALUE; // not ended, not known, or released meanwhile
            }
            lib.check(rc, "kvflux_mori_status_copy_end_ns");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    /**
     * Hands {@code status}'s push, when it comes, to {@code target}, on the notification thread (started
     * now if it is not running). Register a status before anyone waits for it; a push that came before is
     * lost, so the waiter queries the status once after registering (as {@code PushWait} does).
     */
    public void await(long engine, long status, Target target) {
        waiting.put(status, new Waiter(engine, target));
        if (notifier == null) {
            startNotifier();
        }
    }

    /** Stops waiting for {@code status}'s push (it was released, or settled otherwise). */
    public void forget(long status) {
        waiting.remove(status);
    }

    /**
     * Ends the wait of every status of {@code engine} still waiting for its push with ERR_BAD_STATE: the engine
     * was destroyed, and its statuses with it, so no push will come.
     */
    public void forgetEngine(long engine) {
        for (Map.Entry<Long, Waiter> entry : waiting.entrySet()) {
            if (entry.getValue().engine() == engine && waiting.remove(entry.getKey(), entry.getValue())) {
                deliver(entry.getValue(), STATUS_ERR_BAD_STATE, 0, null); // no push: the engine is gone
            }
        }
    }

    private static void deliver(Waiter waiter, int code, long copyEndNanos, Stages stages) {
        try {
            waiter.target().pushed(code, copyEndNanos, stages);
        } catch (Throwable ignored) {
            // a target that throws settles nothing; its waiter's timeout ends it
        }
    }

    /** How many statuses wait for a push: for tests and leak checks. */
    public int waiting() {
        return waiting.size();
    }

    private synchronized void startNotifier() {
        if (notifier == null) {
            notifier = Thread.ofPlatform().name("kvflux-mori-push").daemon().start(this::notifyForever);
        }
    }

    private void notifyForever() {
        try {
            takeForever();
        } catch (Throwable t) {
            // the library failed in a way no retry mends; pause before the next thread tries, so that a library
            // that fails at once does not spin up threads
            java.util.concurrent.locks.LockSupport.parkNanos(TAKE_TIMEOUT_MS * 1_000_000L);
        } finally {
            synchronized (this) {
                notifier = null;
            }
            if (!waiting.isEmpty()) {
                startNotifier(); // statuses still wait: keep taking their pushes
            }
        }
    }

    private void takeForever() throws Throwable {
        boolean staged = takeStages != null;
        long entryBytes = staged ? STAGED_ENTRY_BYTES : ENTRY_BYTES;
        Stages stages = new Stages();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment entries = arena.allocate(entryBytes * BATCH, 8);
            MemorySegment count = arena.allocate(JAVA_LONG);
            for (;;) {
                int rc = staged ? (int) takeStages.invokeExact(entries, (long) BATCH, TAKE_TIMEOUT_MS, count)
                        : (int) take.invokeExact(entries, (long) BATCH, TAKE_TIMEOUT_MS, count);
                long returned = System.nanoTime();
                if (rc < 0) {
                    Thread.sleep(TAKE_TIMEOUT_MS); // the library refused; its waiters' timeouts still end them
                    continue;
                }
                long n = count.get(JAVA_LONG, 0);
                for (long i = 0; i < n; i++) {
                    long base = i * entryBytes;
                    Waiter waiter = waiting.remove(entries.get(JAVA_LONG, base));
                    if (waiter != null) {
                        stages.signalled = staged ? entries.get(JAVA_LONG, base + ENTRY_BYTES) : 0;
                        stages.queued = staged ? entries.get(JAVA_LONG, base + ENTRY_BYTES + 8) : 0;
                        stages.taken = staged ? entries.get(JAVA_LONG, base + ENTRY_BYTES + 16) : 0;
                        stages.returned = returned;
                        deliver(waiter, entries.get(JAVA_INT, base + 8), entries.get(JAVA_LONG, base + 16), stages);
                    }
                }
            }
        }
    }
}
