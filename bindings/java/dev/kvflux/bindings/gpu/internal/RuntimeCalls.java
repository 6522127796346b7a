package dev.kvflux.bindings.gpu.internal;

import static dev.kvflux.bindings.internal.Downcalls.call;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Raw downcalls into one GPU runtime library, HIP's {@code libamdhip64} or CUDA's {@code libcudart}.
 * The two runtimes share the ABI of every call bound here; only the symbol prefix differs
 * ({@code hipEventQuery}, {@code cudaEventQuery}). Every method returns the runtime's own error code,
 * unchecked: the public {@code GpuRuntime} checks each one.
 *
 * <p>Pointers and handles travel as {@code long} addresses; out-parameters are segments the caller
 * allocates. {@link #eventQuery} is linked {@code critical}: it never blocks and never calls back.
 */
public final class RuntimeCalls {

    /** The canonical layouts of the calls bound here. */
    public static final class Layouts {
        private Layouts() {
        }

        /** {@code size_t} on the 64-bit platforms both runtimes support. */
        public static final MemoryLayout SIZE_T = JAVA_LONG;
        /** Bytes in {@code hipIpcMemHandle_t} / {@code cudaIpcMemHandle_t}. */
        public static final int IPC_HANDLE_BYTES = 64;
        /** {@code struct { char reserved[64]; }}, passed by value to the open call. */
        public static final MemoryLayout IPC_HANDLE = MemoryLayout.structLayout(
                MemoryLayout.sequenceLayout(IPC_HANDLE_BYTES, java.lang.foreign.ValueLayout.JAVA_BYTE)
                        .withName("reserved"));
        /** {@code void (*)(void *userData)}: the host function the stream calls. */
        public static final FunctionDescriptor HOST_FN = FunctionDescriptor.ofVoid(ADDRESS);
    }

    /** The runtime's success code (0 in both). */
    public static final int SUCCESS = 0;
    /** {@code hipErrorNotReady} / {@code cudaErrorNotReady}: 600 in both. */
    public static final int NOT_READY = 600;
    /** {@code *StreamNonBlocking}. */
    public static final int STREAM_NON_BLOCKING = 1;
    /** {@code *EventDisableTiming}. */
    public static final int EVENT_DISABLE_TIMING = 2;
    /** {@code *IpcMemLazyEnablePeerAccess}. */
    public static final int IPC_LAZY_ENABLE_PEER_ACCESS = 1;
    /** {@code *MemcpyHostToDevice}, {@code DeviceToHost}, {@code DeviceToDevice}, {@code Default}. */
    public static final int MEMCPY_HOST_TO_DEVICE = 1;
    public static final int MEMCPY_DEVICE_TO_HOST = 2;
    public static final int MEMCPY_DEFAULT = 4;

    private final String prefix;
    private final Path library;
    private final MethodHandle getDeviceCount;
    private final MethodHandle setDevice;
    private final MethodHandle deviceCanAccessPeer;
    private final MethodHandle deviceSynchronize;
    private final MethodHandle malloc;
    private final MethodHandle free;
    private final MethodHandle mallocHost;
    private final MethodHandle freeHost;
    private final MethodHandle memset;
    private final MethodHandle memsetAsync;
    private final MethodHandle memcpy;
    private final MethodHandle memcpyAsync;
    private final MethodHandle memcpyPeerAsync;
    private final MethodHandle streamCreateWithFlags;
    private final MethodHandle streamDestroy;
    private final MethodHandle streamSynchronize;
    private final MethodHandle streamWaitEvent;
    private final MethodHandle eventCreateWithFlags;
    private final MethodHandle eventRecord;
    private final MethodHandle eventQuery;
    private final MethodHandle eventSynchronize;
    private final MethodHandle eventDestroy;
    private final MethodHandle eventElapsedTime;
    private final MethodHandle ipcGetMemHandle;
    private final MethodHandle ipcOpenMemHandle;
    private final MethodHandle ipcCloseMemHandle;
    private final MethodHandle launchHostFunc;
    private final MethodHandle getErrorName;
    private final MethodHandle getErrorString;
    private final MethodHandle runtimeGetVersion;
    private final MethodHandle driverGetVersion;

    private RuntimeCalls(String prefix, Path library, SymbolLookup symbols) {
        this.prefix = prefix;
        this.library = library;
        Binder b = new Binder(prefix, library, symbols);
        getDeviceCount = b.bind("GetDeviceCount", JAVA_INT, ADDRESS);
        setDevice = b.bind("SetDevice", JAVA_INT, JAVA_INT);
        deviceCanAccessPeer = b.bind("DeviceCanAccessPeer", JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT);
        deviceSynchronize = b.bind("DeviceSynchronize", JAVA_INT);
        malloc = b.bind("Malloc", JAVA_INT, ADDRESS, JAVA_LONG);
        free = b.bind("Free", JAVA_INT, JAVA_LONG);
        // Pinned host memory, for the scatter/gather path's metadata; optional, as only that path needs it.
        mallocHost = b.bindOptional("MallocHost", JAVA_INT, ADDRESS, JAVA_LONG);
        freeHost = b.bindOptional("FreeHost", JAVA_INT, JAVA_LONG);
        memset = b.bind("Memset", JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG);
        memsetAsync = b.bind("MemsetAsync", JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG);
        memcpy = b.bind("Memcpy", JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT);
        memcpyAsync = b.bind("MemcpyAsync", JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG);
        memcpyPeerAsync = b.bind("MemcpyPeerAsync", JAVA_INT,
                JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG);
        streamCreateWithFlags = b.bind("StreamCreateWithFlags", JAVA_INT, ADDRESS, JAVA_INT);
        streamDestroy = b.bind("StreamDestroy", JAVA_INT, JAVA_LONG);
        streamSynchronize = b.bind("StreamSynchronize", JAVA_INT, JAVA_LONG);
        streamWaitEvent = b.bind("StreamWaitEvent", JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT);
        eventCreateWithFlags = b.bind("EventCreateWithFlags", JAVA_INT, ADDRESS, JAVA_INT);
        eventRecord = b.bind("EventRecord", JAVA_INT, JAVA_LONG, JAVA_LONG);
        eventQuery = b.bindCritical("EventQuery", JAVA_INT, JAVA_LONG);
        eventSynchronize = b.bind("EventSynchronize", JAVA_INT, JAVA_LONG);
        eventDestroy = b.bind("EventDestroy", JAVA_INT, JAVA_LONG);
        eventElapsedTime = b.bind("EventElapsedTime", JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG);
        ipcGetMemHandle = b.bind("IpcGetMemHandle", JAVA_INT, ADDRESS, JAVA_LONG);
        ipcOpenMemHandle = b.bind("IpcOpenMemHandle", JAVA_INT, ADDRESS, Layouts.IPC_HANDLE, JAVA_INT);
        ipcCloseMemHandle = b.bind("IpcCloseMemHandle", JAVA_INT, JAVA_LONG);
        // Optional: HIP before 5.3 (Debian 12's libamdhip64-5 is 5.2) lacks it.
        launchHostFunc = b.bindOptional("LaunchHostFunc", JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG);
        getErrorName = b.bind("GetErrorName", ADDRESS, JAVA_INT);
        getErrorString = b.bind("GetErrorString", ADDRESS, JAVA_INT);
        runtimeGetVersion = b.bind("RuntimeGetVersion", JAVA_INT, ADDRESS);
        driverGetVersion = b.bind("DriverGetVersion", JAVA_INT, ADDRESS);
    }

    /**
     * Binds every call from the library at {@code library} (a path, or a bare file name the dynamic
     * loader resolves) with the symbol prefix {@code hip} or {@code cuda}.
     *
     * @throws IllegalArgumentException if the library cannot be loaded (as {@link SymbolLookup#libraryLookup})
     * @throws MissingSymbolException if a call is missing from it
     */
    public static RuntimeCalls bind(String prefix, Path library) {
        Objects.requireNonNull(prefix, "prefix");
        SymbolLookup symbols = library.getParent() == null
                ? SymbolLookup.libraryLookup(library.toString(), Arena.global())
                : SymbolLookup.libraryLookup(library, Arena.global());
        return new RuntimeCalls(prefix, library, symbols);
    }

    /** A call the library does not export: it is not the runtime it claims to be, or too old. */
    public static final class MissingSymbolException extends RuntimeException {
        public MissingSymbolException(String message) {
            super(message);
        }
    }

    /** The symbol prefix, {@code hip} or {@code cuda}. */
    public String prefix() {
        return prefix;
    }

    public Path library() {
        return library;
    }

    /** The runtime's name for {@code call}: {@code hipEventQuery}. */
    public String symbol(String call) {
        return prefix + call;
    }

    /** A stub the stream can call as a host function, dispatching to {@code target}. */
    public static MemorySegment hostFunctionStub(MethodHandle target, Arena arena) {
        return Linker.nativeLinker().upcallStub(target, Layouts.HOST_FN, arena);
    }

    public int getDeviceCount(MemorySegment count) {
        return call(() -> (int) getDeviceCount.invokeExact(count));
    }

    public int setDevice(int device) {
        return call(() -> (int) setDevice.invokeExact(device));
    }

    public int deviceCanAccessPeer(MemorySegment can, int device, int peer) {
        return call(() -> (int) deviceCanAccessPeer.invokeExact(can, device, peer));
    }

    public int deviceSynchronize() {
        return call(() -> (int) deviceSynchronize.invokeExact());
    }

    public int malloc(MemorySegment pointer, long size) {
        return call(() -> (int) malloc.invokeExact(pointer, size));
    }

    public int free(long pointer) {
        return call(() -> (int) free.invokeExact(pointer));
    }

    /**
     * Allocates page-locked host memory the device can copy from asynchronously.
     *
     * @throws MissingSymbolException if the library lacks {@code *MallocHost}
     */
    public int mallocHost(MemorySegment pointer, long size) {
        requireOptional(mallocHost, "MallocHost", "");
        return call(() -> (int) mallocHost.invokeExact(pointer, size));
    }

    public int freeHost(long pointer) {
        requireOptional(freeHost, "FreeHost", "");
        return call(() -> (int) freeHost.invokeExact(pointer));
    }

    public int memset(long pointer, int value, long size) {
        return call(() -> (int) memset.invokeExact(pointer, value, size));
    }

    public int memsetAsync(long pointer, int value, long size, long stream) {
        return call(() -> (int) memsetAsync.invokeExact(pointer, value, size, stream));
    }

    public int memcpy(long dst, long src, long size, int kind) {
        return call(() -> (int) memcpy.invokeExact(dst, src, size, kind));
    }

    public int memcpyAsync(long dst, long src, long size, int kind, long stream) {
        return call(() -> (int) memcpyAsync.invokeExact(dst, src, size, kind, stream));
    }

    public int memcpyPeerAsync(long dst, int dstDevice, long src, int srcDevice, long size, long stream) {
        return call(() -> (int) memcpyPeerAsync.invokeExact(dst, dstDevice, src, srcDevice, size, stream));
    }

    public int streamCreateWithFlags(MemorySegment stream, int flags) {
        return call(() -> (int) streamCreateWithFlags.invokeExact(stream, flags));
    }

    public int streamDestroy(long stream) {
        return call(() -> (int) streamDestroy.invokeExact(stream));
    }

    public int streamSynchronize(long stream) {
        return call(() -> (int) streamSynchronize.invokeExact(stream));
    }

    public int streamWaitEvent(long stream, long event, int flags) {
        return call(() -> (int) streamWaitEvent.invokeExact(stream, event, flags));
    }

    public int eventCreateWithFlags(MemorySegment event, int flags) {
        return call(() -> (int) eventCreateWithFlags.invokeExact(event, flags));
    }

    public int eventRecord(long event, long stream) {
        return call(() -> (int) eventRecord.invokeExact(event, stream));
    }

    public int eventQuery(long event) {
        return call(() -> (int) eventQuery.invokeExact(event));
    }

    public int eventSynchronize(long event) {
        return call(() -> (int) eventSynchronize.invokeExact(event));
    }

    public int eventDestroy(long event) {
        return call(() -> (int) eventDestroy.invokeExact(event));
    }

    public int eventElapsedTime(MemorySegment millis, long start, long end) {
        return call(() -> (int) eventElapsedTime.invokeExact(millis, start, end));
    }

    public int ipcGetMemHandle(MemorySegment handle, long pointer) {
        return call(() -> (int) ipcGetMemHandle.invokeExact(handle, pointer));
    }

    public int ipcOpenMemHandle(MemorySegment pointer, MemorySegment handle, int flags) {
        return call(() -> (int) ipcOpenMemHandle.invokeExact(pointer, handle, flags));
    }

    public int ipcCloseMemHandle(long pointer) {
        return call(() -> (int) ipcCloseMemHandle.invokeExact(pointer));
    }

    /** Whether the library has {@code *LaunchHostFunc} (HIP 5.3 and later, every CUDA since 10). */
    public boolean hasLaunchHostFunc() {
        return launchHostFunc != null;
    }

    /**
     * Queues a host function.
     *
     * @throws MissingSymbolException if the library lacks it; check {@link #hasLaunchHostFunc()} first
     */
    public int launchHostFunc(long stream, MemorySegment function, long userData) {
        requireOptional(launchHostFunc, "LaunchHostFunc", " (HIP before 5.3): host functions, and with them pushed"
                + " completion, need a newer runtime; use the polled wait instead");
        return call(() -> (int) launchHostFunc.invokeExact(stream, function, userData));
    }

    /** The runtime's name for an error code, {@code cudaErrorNoDevice}; null if it returned none. */
    public String errorName(int code) {
        return string(call(() -> (MemorySegment) getErrorName.invokeExact(code)));
    }

    /** The runtime's description of an error code; null if it returned none. */
    public String errorString(int code) {
        return string(call(() -> (MemorySegment) getErrorString.invokeExact(code)));
    }

    public int runtimeGetVersion(MemorySegment version) {
        return call(() -> (int) runtimeGetVersion.invokeExact(version));
    }

    public int driverGetVersion(MemorySegment version) {
        return call(() -> (int) driverGetVersion.invokeExact(version));
    }

    /** Throws if the optional call {@code call} is not bound; {@code why} follows the library and the symbol. */
    private void requireOptional(MethodHandle handle, String call, String why) {
        if (handle == null) {
            throw new MissingSymbolException(library + " does not export " + prefix + call + why);
        }
    }

    private static String string(MemorySegment pointer) {
        if (pointer.equals(MemorySegment.NULL)) {
            return null;
        }
        return pointer.reinterpret(4096).getString(0);
    }

    /** Looks symbols up with the runtime's prefix and links them. */
    private static final class Binder {
        private final String prefix;
        private final Path library;
        private final SymbolLookup symbols;
        private final Linker linker = Linker.nativeLinker();

        Binder(String prefix, Path library, SymbolLookup symbols) {
            this.prefix = prefix;
            this.library = library;
            this.symbols = symbols;
        }

        MethodHandle bind(String call, MemoryLayout result, MemoryLayout... args) {
            return linker.downcallHandle(find(call), FunctionDescriptor.of(result, args));
        }

        MethodHandle bindOptional(String call, MemoryLayout result, MemoryLayout... args) {
            return symbols.find(prefix + call)
                    .map(symbol -> linker.downcallHandle(symbol, FunctionDescriptor.of(result, args)))
                    .orElse(null);
        }

        MethodHandle bindCritical(String call, MemoryLayout result, MemoryLayout... args) {
            return linker.downcallHandle(find(call), FunctionDescriptor.of(result, args),
                    Linker.Option.critical(true));
        }

        private MemorySegment find(String call) {
            String name = prefix + call;
            return symbols.find(name).orElseThrow(() -> new MissingSymbolException(
                    library + " does not export " + name + "; it is not a " + prefix
                            + " runtime kvflux can use, or it is too old (HIP 5 / CUDA 11 or newer)"));
        }
    }
}
