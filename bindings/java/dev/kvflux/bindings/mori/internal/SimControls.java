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

/** The raw downcalls of the simulator's extra functions ({@code kvflux_mori_sim.h}). */
public final class SimControls {
    private final MoriNative lib;
    private final MethodHandle liveHandles;
    private final MethodHandle setTiming;
    private final MethodHandle failNth;
    private final MethodHandle hangNth;
    private final MethodHandle statusFinishNs;
    private final MethodHandle nowNs;
    private final MethodHandle hostAlloc;
    private final MethodHandle hostFree;
    private final MethodHandle openMappings;
    private final MethodHandle faultEvery;

    private SimControls(MoriNative lib, MethodHandle liveHandles, MethodHandle setTiming, MethodHandle failNth,
            MethodHandle hangNth, MethodHandle statusFinishNs, MethodHandle nowNs, MethodHandle[] shared) {
        this.lib = lib;
        this.liveHandles = liveHandles;
        this.setTiming = setTiming;
        this.failNth = failNth;
        this.hangNth = hangNth;
        this.statusFinishNs = statusFinishNs;
        this.nowNs = nowNs;
        this.hostAlloc = shared[0];
        this.hostFree = shared[1];
        this.openMappings = shared[2];
        this.faultEvery = shared[3];
    }

    /** The controls if the library has all of them (it is the simulator), else null. */
    static SimControls bindIfPresent(SymbolLookup lookup, MoriNative lib) {
        MethodHandle live = MoriNative.bindOptional(lookup, "kvflux_sim_live_handles", FunctionDescriptor.of(JAVA_INT));
        MethodHandle timing = MoriNative.bindOptional(lookup, "kvflux_sim_set_timing",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        MethodHandle fail = MoriNative.bindOptional(lookup, "kvflux_sim_fail_nth",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS));
        MethodHandle hang = MoriNative.bindOptional(lookup, "kvflux_sim_hang_nth",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT));
        MethodHandle finish = MoriNative.bindOptional(lookup, "kvflux_sim_status_finish_ns",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS));
        MethodHandle now = MoriNative.bindOptional(lookup, "kvflux_sim_now_ns", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        MethodHandle[] shared = {
            MoriNative.bindOptional(lookup, "kvflux_sim_host_alloc", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS)),
            MoriNative.bindOptional(lookup, "kvflux_sim_host_free", FunctionDescriptor.of(JAVA_INT, ADDRESS)),
            MoriNative.bindOptional(lookup, "kvflux_sim_open_mappings", FunctionDescriptor.of(JAVA_INT)),
            MoriNative.bindOptional(lookup, "kvflux_sim_fault_every",
                    FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS)),
        };
        if (live == null || timing == null || fail == null || hang == null || finish == null || now == null
                || java.util.Arrays.asList(shared).contains(null)) {
            return null;
        }
        return new SimControls(lib, live, timing, fail, hang, finish, now, shared);
    }

    public int liveHandles() {
        try {
            return lib.check((int) liveHandles.invokeExact(), "kvflux_sim_live_handles");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public void setTiming(long engine, long blockOverheadNs, long bytesPerSecond) {
        try {
            lib.check((int) setTiming.invokeExact(engine, blockOverheadNs, bytesPerSecond), "kvflux_sim_set_timing");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public void failNth(long engine, int nth, int code, String message) {
        try (Arena arena = Arena.ofConfined()) {
            lib.check((int) failNth.invokeExact(engine, nth, code, arena.allocateFrom(message)), "kvflux_sim_fail_nth");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public void hangNth(long engine, int nth) {
        try {
            lib.check((int) hangNth.invokeExact(engine, nth), "kvflux_sim_hang_nth");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public long statusFinishNanos(long status) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            lib.check((int) statusFinishNs.invokeExact(status, out), "kvflux_sim_status_finish_ns");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public long nowNanos() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            lib.check((int) nowNs.invokeExact(out), "kvflux_sim_now_ns");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    /** {@code size} zeroed bytes of host memory that an engine of another process can reach through its descriptor. */
    public MemorySegment hostAlloc(long size) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            lib.check((int) hostAlloc.invokeExact(size, out), "kvflux_sim_host_alloc");
            return out.get(ADDRESS, 0).reinterpret(size);
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public void hostFree(MemorySegment buffer) {
        try {
            lib.check((int) hostFree.invokeExact(buffer), "kvflux_sim_host_free");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public int openMappings() {
        try {
            return lib.check((int) openMappings.invokeExact(), "kvflux_sim_open_mappings");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }

    public void faultEvery(long engine, int every, int kind, int code, long slowNanos, String message) {
        try (Arena arena = Arena.ofConfined()) {
            lib.check((int) faultEvery.invokeExact(engine, every, kind, code, slowNanos, arena.allocateFrom(message)),
                    "kvflux_sim_fault_every");
        } catch (Throwable t) {
            throw Downcalls.rethrow(t);
        }
    }
}
