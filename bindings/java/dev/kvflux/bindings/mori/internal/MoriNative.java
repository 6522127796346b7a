package dev.kvflux.bindings.mori.internal;

import static dev.kvflux.bindings.internal.Downcalls.call;
import static dev.kvflux.bindings.internal.Downcalls.rethrow;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.kvflux.bindings.mori.MoriIoException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The raw downcalls of one loaded library that implements {@code kvflux_mori.h}: its C layouts, the
 * {@link Linker}, one {@link MethodHandle} per function, and the one checker that turns a negative
 * return code into a {@link MoriIoException} carrying the library's last-error text.
 *
 * <p>Handles are passed as {@code long}; {@code size_t} is {@code long}; {@code uint16_t} is {@code short}.
 * Every method here is a thin call; lifetimes and validation belong to the public classes.
 */
public final class MoriNative {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final int ERROR_TEXT_BYTES = 1024;

    /** Names of the ABI's return codes, index = -code. */
    private static final String[] ERROR_NAMES = {
        "KVFLUX_MORI_OK", "KVFLUX_MORI_E_NULL_ARG", "KVFLUX_MORI_E_BAD_HANDLE", "KVFLUX_MORI_E_INVALID_ARG",
        "KVFLUX_MORI_E_BUFFER_TOO_SMALL", "KVFLUX_MORI_E_DECODE", "KVFLUX_MORI_E_NOT_FOUND",
        "KVFLUX_MORI_E_BAD_STATE", "KVFLUX_MORI_E_NO_MEMORY", "KVFLUX_MORI_E_BACKEND", "KVFLUX_MORI_E_UNSUPPORTED",
    };

    /** The ABI's buffer-too-small code: the two-call pattern retries with the size reported. */
    public static final int E_BUFFER_TOO_SMALL = -4;
    /** The ABI's code for what an implementation cannot do. */
    public static final int E_UNSUPPORTED = -10;

    private final String library;
    private final MethodHandle abiVersion;
    private final MethodHandle implementation;
    private final MethodHandle lastError;
    private final MethodHandle engineCreate;
    private final MethodHandle engineDestroy;
    private final MethodHandle createXgmiBackend;
    private final MethodHandle createRdmaBackend;
    private final MethodHandle engineDescPack;
    private final MethodHandle registerRemote;
    private final MethodHandle deregisterRemote;
    private final MethodHandle engineAllocateUid;
    private final MethodHandle memRegister;
    private final MethodHandle memDeregister;
    private final MethodHandle memPack;
    private final MethodHandle memUnpack;
    private final MethodHandle memQuery;
    private final MethodHandle sessionCreate;
    private final MethodHandle sessionDestroy;
    private final MethodHandle sessionAllocateUid;
    private final MethodHandle batchWrite;
    private final MethodHandle batchRead;
    private final MethodHandle statusCode;
    private final MethodHandle statusMessage;
    private final MethodHandle statusRelease;
    private final MethodHandle waitAll;
    private final MethodHandle liveHandles; // the real shim's own count; null in the simulator
    private final MethodHandle rdmaPreflight; // the real shim's RDMA check; null in the simulator
    private final SimControls sim;
    private final PushCalls push; // null in a library built before push completion

    /**
     * Binds every function of the ABI in {@code lookup}.
     *
     * @throws MoriIoException if a function is missing: the library is not a kvflux MoRI shim
     */
    MoriNative(SymbolLookup lookup, String library) {
        this.library = library;
        FunctionDescriptor packFn = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS);
        FunctionDescriptor bytesInFn = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG);
        FunctionDescriptor stringOutFn = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS);
        FunctionDescriptor handleFn = FunctionDescriptor.of(JAVA_INT, JAVA_LONG);
        FunctionDescriptor handleOutFn = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS);
        FunctionDescriptor batchFn = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS,
                JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS);
        abiVersion = bind(lookup, "kvflux_mori_abi_version", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        implementation = bind(lookup, "kvflux_mori_implementation", stringOutFn);
        lastError = bind(lookup, "kvflux_mori_last_error", stringOutFn);
        engineCreate = bind(lookup, "kvflux_mori_engine_create",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_SHORT, ADDRESS));
        engineDestroy = bind(lookup, "kvflux_mori_engine_destroy", handleFn);
        createXgmiBackend = bind(lookup, "kvflux_mori_engine_create_xgmi_backend",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT));
        createRdmaBackend = bind(lookup, "kvflux_mori_engine_create_rdma_backend",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
        engineDescPack = bind(lookup, "kvflux_mori_engine_desc_pack", packFn);
        registerRemote = bind(lookup, "kvflux_mori_engine_register_remote", bytesInFn);
        deregisterRemote = bind(lookup, "kvflux_mori_engine_deregister_remote", bytesInFn);
        engineAllocateUid = bind(lookup, "kvflux_mori_engine_allocate_uid", handleOutFn);
        memRegister = bind(lookup, "kvflux_mori_mem_register",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS));
        memDeregister = bind(lookup, "kvflux_mori_mem_deregister", handleFn);
        memPack = bind(lookup, "kvflux_mori_mem_pack", packFn);
        memUnpack = bind(lookup, "kvflux_mori_mem_unpack",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
        memQuery = bind(lookup, "kvflux_mori_mem_query",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        sessionCreate = bind(lookup, "kvflux_mori_session_create",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS));
        sessionDestroy = bind(lookup, "kvflux_mori_session_destroy", handleFn);
        sessionAllocateUid = bind(lookup, "kvflux_mori_session_allocate_uid", handleOutFn);
        batchWrite = bind(lookup, "kvflux_mori_session_batch_write", batchFn);
        batchRead = bind(lookup, "kvflux_mori_session_batch_read", batchFn);
        // The hot query: tiny, never blocks for long, called every slice for every status in flight.
        statusCode = bind(lookup, "kvflux_mori_status_code", handleFn, Linker.Option.critical(true));
        statusMessage = bind(lookup, "kvflux_mori_status_message", packFn);
        statusRelease = bind(lookup, "kvflux_mori_status_release", handleFn);
        waitAll = bind(lookup, "kvflux_mori_wait_all",
                FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS));
        liveHandles = bindOptional(lookup, "kvflux_mori_live_handles", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        rdmaPreflight = bindOptional(lookup, "kvflux_mori_rdma_preflight",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        sim = SimControls.bindIfPresent(lookup, this);
        push = PushCalls.bindIfPresent(lookup, this);
    }

    private MethodHandle bind(SymbolLookup lookup, String name, FunctionDescriptor fn, Linker.Option... options) {
        MemorySegment symbol = lookup.find(name).orElseThrow(() -> new MoriIoException(
                MoriIoException.LIBRARY_UNAVAILABLE, "KVFLUX_MORI_E_ABI",
                library + " has no function " + name + ": it is not a kvflux MoRI IO library of ABI version "
                        + NativeLibraries.ABI_VERSION + ". Rebuild it from bindings/native (kvflux_mori.h)"));
        return LINKER.downcallHandle(symbol, fn, options);
    }

    static MethodHandle bindOptional(SymbolLookup lookup, String name, FunctionDescriptor fn) {
        return lookup.find(name).map(symbol -> LINKER.downcallHandle(symbol, fn)).orElse(null);
    }

    /** The library this binding was loaded from (a path or a name). */
    public String library() {
        return library;
    }

    /** The simulator's extra controls, if this library is the simulator. */
    public Optional<SimControls> sim() {
        return Optional.ofNullable(sim);
    }

    /** Push completion and its notification thread, if the library has the calls. */
    public Optional<PushCalls> push() {
        return Optional.ofNullable(push);
    }

    /**
     * The handles open in the library, every kind together: the real shim's count, else the simulator's;
     * empty if the library counts none.
     */
    public java.util.OptionalLong liveHandles() {
        if (liveHandles == null) {
            return sim == null ? java.util.OptionalLong.empty() : java.util.OptionalLong.of(sim.liveHandles());
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check((int) liveHandles.invokeExact(out), "kvflux_mori_live_handles");
            return java.util.OptionalLong.of(out.get(JAVA_LONG, 0));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * The real shim's check before MoRI's RDMA backend is created, with the RDMA device directory and the
     * ROCm SMI library given (null: the host's own); throws the library's refusal.
     *
     * @throws UnsupportedOperationException if the library has no such check (the simulator)
     */
    public void rdmaPreflight(String ibClassDir, String smiLibrary) {
        if (rdmaPreflight == null) {
            throw new UnsupportedOperationException(library + " has no kvflux_mori_rdma_preflight (not the real shim)");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dir = ibClassDir == null ? MemorySegment.NULL : arena.allocateFrom(ibClassDir);
            MemorySegment smi = smiLibrary == null ? MemorySegment.NULL : arena.allocateFrom(smiLibrary);
            check((int) rdmaPreflight.invokeExact(dir, smi), "kvflux_mori_rdma_preflight");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- the checker ---------------------------------------------------------------------------

    /**
     * Returns {@code rc} if it is not negative, else throws the ABI's error for {@code call} with this
     * thread's last-error text.
     */
    public int check(int rc, String call) {
        if (rc < 0) {
            String text = lastError();
            String reason = text.startsWith(call + ": ") ? text.substring(call.length() + 2) : text;
            throw new MoriIoException(rc, errorName(rc), call + " failed (" + errorName(rc) + "): " + reason);
        }
        return rc;
    }

    public static String errorName(int rc) {
        return rc <= 0 && -rc < ERROR_NAMES.length ? ERROR_NAMES[-rc] : "KVFLUX_MORI_E_UNKNOWN(" + rc + ")";
    }

    /** This thread's last-error text from the library. */
    public String lastError() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(ERROR_TEXT_BYTES);
            MemorySegment len = arena.allocate(JAVA_LONG);
            int rc = (int) lastError.invokeExact(buf, (long) ERROR_TEXT_BYTES, len);
            return rc == 0 ? buf.getString(0) : "(no error text: kvflux_mori_last_error returned " + rc + ")";
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- library -------------------------------------------------------------------------------

    public int abiVersion() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check((int) abiVersion.invokeExact(out), "kvflux_mori_abi_version");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public String implementation() {
        return readString(implementation, "kvflux_mori_implementation");
    }

    private String readString(MethodHandle fn, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment len = arena.allocate(JAVA_LONG);
            MemorySegment buf = arena.allocate(64);
            int rc = (int) fn.invokeExact(buf, 64L, len);
            if (rc == E_BUFFER_TOO_SMALL) {
                buf = arena.allocate(len.get(JAVA_LONG, 0) + 1);
                rc = (int) fn.invokeExact(buf, buf.byteSize(), len);
            }
            check(rc, call);
            return buf.getString(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- engine --------------------------------------------------------------------------------

    public long engineCreate(String key, String host, int port) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int rc = (int) engineCreate.invokeExact(arena.allocateFrom(key), arena.allocateFrom(host),
                    (short) port, out);
            check(rc, "kvflux_mori_engine_create");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public void engineDestroy(long engine) {
        callHandle(engineDestroy, engine, "kvflux_mori_engine_destroy");
    }

    public void createXgmiBackend(long engine, int numStreams, int numEvents) {
        check(call(() -> (int) createXgmiBackend.invokeExact(engine, numStreams, numEvents)),
                "kvflux_mori_engine_create_xgmi_backend");
    }

    public void createRdmaBackend(long engine, int qpPerTransfer, int postBatchSize, int numWorkerThreads,
            int pollCqMode, boolean enableNotification) {
        int notification = enableNotification ? 1 : 0;
        check(call(() -> (int) createRdmaBackend.invokeExact(engine, qpPerTransfer, postBatchSize, numWorkerThreads,
                pollCqMode, notification)), "kvflux_mori_engine_create_rdma_backend");
    }

    public byte[] engineDescPack(long engine) {
        return pack(engineDescPack, engine, "kvflux_mori_engine_desc_pack");
    }

    public void registerRemote(long engine, byte[] packed) {
        bytesIn(registerRemote, engine, packed, "kvflux_mori_engine_register_remote");
    }

    public void deregisterRemote(long engine, byte[] packed) {
        bytesIn(deregisterRemote, engine, packed, "kvflux_mori_engine_deregister_remote");
    }

    public long engineAllocateUid(long engine) {
        return handleOut(engineAllocateUid, engine, "kvflux_mori_engine_allocate_uid");
    }

    // ---- memory --------------------------------------------------------------------------------

    public long memRegister(long engine, MemorySegment data, long size, int device, int location) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check((int) memRegister.invokeExact(engine, data, size, device, location, out),
                    "kvflux_mori_mem_register");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public void memDeregister(long mem) {
        callHandle(memDeregister, mem, "kvflux_mori_mem_deregister");
    }

    public byte[] memPack(long mem) {
        return pack(memPack, mem, "kvflux_mori_mem_pack");
    }

    public long memUnpack(long engine, byte[] packed) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            MemorySegment bytes = arena.allocateFrom(JAVA_BYTE, packed);
            check((int) memUnpack.invokeExact(engine, bytes, (long) packed.length, out), "kvflux_mori_mem_unpack");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The descriptor's id, size, device and location, in that order. */
    public long[] memQuery(long mem) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment id = arena.allocate(JAVA_INT);
            MemorySegment size = arena.allocate(JAVA_LONG);
            MemorySegment device = arena.allocate(JAVA_INT);
            MemorySegment location = arena.allocate(JAVA_INT);
            check((int) memQuery.invokeExact(mem, id, size, device, location), "kvflux_mori_mem_query");
            return new long[] {Integer.toUnsignedLong(id.get(JAVA_INT, 0)), size.get(JAVA_LONG, 0),
                device.get(JAVA_INT, 0), location.get(JAVA_INT, 0)};
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- sessions and transfers ----------------------------------------------------------------

    public long sessionCreate(long engine, long local, long remote) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check((int) sessionCreate.invokeExact(engine, local, remote, out), "kvflux_mori_session_create");
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public void sessionDestroy(long session) {
        callHandle(sessionDestroy, session, "kvflux_mori_session_destroy");
    }

    public long sessionAllocateUid(long session) {
        return handleOut(sessionAllocateUid, session, "kvflux_mori_session_allocate_uid");
    }

    /** Posts one batch; the three arrays go to the library as they are, lengths included. */
    public long batch(boolean read, long session, long[] localOffsets, long[] remoteOffsets, long[] sizes,
            long transferUid) {
        String call = read ? "kvflux_mori_session_batch_read" : "kvflux_mori_session_batch_write";
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            MemorySegment local = arena.allocateFrom(JAVA_LONG, localOffsets);
            MemorySegment remote = arena.allocateFrom(JAVA_LONG, remoteOffsets);
            MemorySegment size = arena.allocateFrom(JAVA_LONG, sizes);
            MethodHandle fn = read ? batchRead : batchWrite;
            check((int) fn.invokeExact(session, local, (long) localOffsets.length, remote,
                    (long) remoteOffsets.length, size, (long) sizes.length, transferUid, out), call);
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- statuses ------------------------------------------------------------------------------

    /** The MoRI status code (>= 0); a bad handle throws. Linked critical: no allocation, no upcall. */
    public int statusCode(long status) {
        return check(call(() -> (int) statusCode.invokeExact(status)), "kvflux_mori_status_code");
    }

    public String statusMessage(long status) {
        return new String(pack(statusMessage, status, "kvflux_mori_status_message"), StandardCharsets.UTF_8);
    }

    public void statusRelease(long status) {
        callHandle(statusRelease, status, "kvflux_mori_status_release");
    }

    /** IOEngine::WaitAll over the handles (0 entries are skipped); returns the MoRI status code. */
    public int waitAll(long engine, long[] statuses, int timeoutMs) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment handles = arena.allocateFrom(JAVA_LONG, statuses);
            MemorySegment out = arena.allocate(JAVA_INT);
            check((int) waitAll.invokeExact(engine, handles, (long) statuses.length, timeoutMs, out),
                    "kvflux_mori_wait_all");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---- shapes shared by several functions ----------------------------------------------------

    private void callHandle(MethodHandle fn, long handle, String function) {
        check(call(() -> (int) fn.invokeExact(handle)), function);
    }

    private long handleOut(MethodHandle fn, long handle, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check((int) fn.invokeExact(handle, out), call);
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private void bytesIn(MethodHandle fn, long handle, byte[] bytes, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment in = arena.allocateFrom(JAVA_BYTE, bytes);
            check((int) fn.invokeExact(handle, in, (long) bytes.length), call);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The two-call pattern: try a small buffer, retry with the size the library asks for. */
    private byte[] pack(MethodHandle fn, long handle, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment len = arena.allocate(JAVA_LONG);
            MemorySegment buf = arena.allocate(256);
            int rc = (int) fn.invokeExact(handle, buf, buf.byteSize(), len);
            if (rc == E_BUFFER_TOO_SMALL) {
                buf = arena.allocate(len.get(JAVA_LONG, 0) + 1);
                rc = (int) fn.invokeExact(handle, buf, buf.byteSize(), len);
            }
            check(rc, call);
            return buf.asSlice(0, len.get(JAVA_LONG, 0)).toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }
}
