package dev.kvflux.bindings.gpu;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.ToIntFunction;

/**
 * The HIP or CUDA runtime, bound through FFM: devices, memory, streams, events, IPC handles and host
 * functions. One instance per loaded library; it is thread-safe, as the runtimes are.
 *
 * <p>Every call's return code goes through one checker: a failure throws {@link GpuException} naming the
 * runtime's error ({@code cudaErrorNoDevice}), the call, and what to do. A runtime library that cannot
 * be loaded throws {@link GpuLibraryNotFoundException} naming the library and its package.
 *
 * <p>The current device is per thread in both runtimes: calls that allocate or create take the device
 * and select it first.
 */
public final class GpuRuntime {

    /** {@code hip} or {@code cuda}: which runtime {@link #load()} binds (default: CUDA, then HIP). */
    public static final String RUNTIME_PROPERTY = "kvflux.gpu.runtime";
    /** A path to the runtime library, overriding the search. */
    public static final String LIBRARY_PROPERTY = "kvflux.gpu.library";

    private final GpuPlatform platform;
    private final RuntimeCalls calls;

    private GpuRuntime(GpuPlatform platform, RuntimeCalls calls) {
        this.platform = platform;
        this.calls = calls;
    }

    /**
     * The runtime the system properties choose: {@value #RUNTIME_PROPERTY} ({@code hip} or
     * {@code cuda}) and {@value #LIBRARY_PROPERTY} (a path). Without either, CUDA is tried first, then HIP.
     *
     * @throws GpuLibraryNotFoundException if no runtime library could be loaded
     */
    public static GpuRuntime load() {
        String name = System.getProperty(RUNTIME_PROPERTY);
        String path = System.getProperty(LIBRARY_PROPERTY);
        if (name != null && !name.isBlank()) {
            GpuPlatform platform = GpuPlatform.named(name);
            return path != null && !path.isBlank() ? load(platform, Path.of(path)) : load(platform);
        }
        if (path != null && !path.isBlank()) {
            GpuPlatform platform = Path.of(path).getFileName().toString().contains("amdhip")
                    ? GpuPlatform.HIP : GpuPlatform.CUDA;
            return load(platform, Path.of(path));
        }
        try {
            return load(GpuPlatform.CUDA);
        } catch (GpuLibraryNotFoundException noCuda) {
            try {
                return load(GpuPlatform.HIP);
            } catch (GpuLibraryNotFoundException noHip) {
                noHip.addSuppressed(noCuda);
                throw noHip;
            }
        }
    }

    /** The runtime of {@code platform}, from the first of {@link GpuPlatform#candidates()} that loads. */
    public static GpuRuntime load(GpuPlatform platform) {
        return loadFirst(platform, platform.candidates());
    }

    /** The runtime of {@code platform} from exactly {@code library}. */
    public static GpuRuntime load(GpuPlatform platform, Path library) {
        return loadFirst(platform, List.of(library));
    }

    static GpuRuntime loadFirst(GpuPlatform platform, List<Path> candidates) {
        Objects.requireNonNull(platform, "platform");
        List<String> tried = new ArrayList<>();
        for (Path candidate : candidates) {
            if (candidate.getParent() != null && !Files.exists(candidate)) {
                tried.add(candidate + ": no such file");
                continue;
            }
            try {
                return new GpuRuntime(platform, RuntimeCalls.bind(platform.prefix(), candidate));
            } catch (IllegalArgumentException notLoadable) {
                tried.add(candidate + ": " + notLoadable.getMessage());
            } catch (RuntimeCalls.MissingSymbolException wrongLibrary) {
                tried.add(wrongLibrary.getMessage());
            }
        }
        throw new GpuLibraryNotFoundException(platform, "tried " + String.join("; ", tried));
    }

    public GpuPlatform platform() {
        return platform;
    }

    /** The library file this runtime was loaded from (or the bare name the loader resolved). */
    public Path library() {
        return calls.library();
    }

    /** The runtime's version, as {@code *RuntimeGetVersion} reports it (CUDA 13.0 is 13000). */
    public int runtimeVersion() {
        return intOut("RuntimeGetVersion", out -> calls.runtimeGetVersion(out));
    }

    /** The driver's version; 0 where no driver is installed. */
    public int driverVersion() {
        return intOut("DriverGetVersion", out -> calls.driverGetVersion(out));
    }

    /** How many GPUs this process sees. */
    public int deviceCount() {
        return intOut("GetDeviceCount", out -> calls.getDeviceCount(out));
    }

    /** Makes {@code device} current on the calling thread. */
    public void setDevice(int device) {
        check(calls.setDevice(device), "SetDevice");
    }

    /** Whether {@code device} can map {@code peer}'s memory. */
    public boolean canAccessPeer(int device, int peer) {
        return intOut("DeviceCanAccessPeer", out -> calls.deviceCanAccessPeer(out, device, peer)) != 0;
    }

    /** Whether this runtime can run host functions on streams (pushed completion needs them). */
    public boolean supportsHostFunctions() {
        return calls.hasLaunchHostFunc();
    }

    /** Waits until all work on the current device is done. */
    public void synchronizeDevice() {
        check(calls.deviceSynchronize(), "DeviceSynchronize");
    }

    /**
     * Allocates {@code size} bytes on {@code device}, zeroed: the zeroing has finished when this returns.
     * (The runtime's memset runs on the legacy default stream, which kvflux's non-blocking streams do not
     * wait for; without the wait here, a copy posted at once could land before the zeros do.)
     */
    public DeviceBuffer allocate(int device, long size) {
        DeviceBuffer buffer = allocateUninitialized(device, size);
        try {
            check(calls.memset(buffer.address(), 0, size), "Memset");
            check(calls.streamSynchronize(0), "StreamSynchronize");
        } catch (GpuException e) {
            buffer.close();
            throw e;
        }
        return buffer;
    }

    /** {@code size} bytes on {@code device}, not initialized: no fill, no wait, for buffers always written first. */
    DeviceBuffer allocateUninitialized(int device, long size) {
        if (size <= 0) {
            throw new IllegalArgumentException("device buffer size must be positive, got " + size);
        }
        setDevice(device);
        long address = addressOut("Malloc", out -> calls.malloc(out, size));
        return new DeviceBuffer(this, address, size, device);
    }

    /** {@code size} bytes of page-locked host memory, for copies that must not stall the posting thread. */
    long allocatePinned(long size) {
        return addressOut("MallocHost", out -> calls.mallocHost(out, size));
    }

    void freePinned(long address) {
        check(calls.freeHost(address), "FreeHost");
    }

    /** A non-blocking stream on {@code device}. */
    public GpuStream createStream(int device) {
        setDevice(device);
        long handle = addressOut("StreamCreateWithFlags",
                out -> calls.streamCreateWithFlags(out, RuntimeCalls.STREAM_NON_BLOCKING));
        return new GpuStream(this, handle, device);
    }

    /** An event on {@code device}; {@code timing} false gives the cheap kind MoRI's pool uses. */
    public GpuEvent createEvent(int device, boolean timing) {
        setDevice(device);
        long handle = addressOut("EventCreateWithFlags",
                out -> calls.eventCreateWithFlags(out, timing ? 0 : RuntimeCalls.EVENT_DISABLE_TIMING));
        return new GpuEvent(this, handle, device, timing);
    }

    /** Exports {@code buffer} for another process on this host. */
    public IpcMemHandle exportIpc(DeviceBuffer buffer) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment handle = arena.allocate(RuntimeCalls.Layouts.IPC_HANDLE);
            check(calls.ipcGetMemHandle(handle, buffer.address()), "IpcGetMemHandle");
            return new IpcMemHandle(handle.toArray(JAVA_BYTE));
        }
    }

    /**
     * Maps another process's buffer into this one on {@code device}, enabling peer access lazily.
     *
     * @param size the exported buffer's size, as its descriptor says
     */
    public PeerBuffer openIpc(IpcMemHandle handle, int device, long size) {
        setDevice(device);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment bytes = arena.allocate(RuntimeCalls.Layouts.IPC_HANDLE);
            MemorySegment.copy(handle.bytes(), 0, bytes, JAVA_BYTE, 0, RuntimeCalls.Layouts.IPC_HANDLE_BYTES);
            long address = addressOut("IpcOpenMemHandle",
                    out -> calls.ipcOpenMemHandle(out, bytes, RuntimeCalls.IPC_LAZY_ENABLE_PEER_ACCESS));
            return new PeerBuffer(this, address, size, device);
        }
    }

    /** Copies {@code dst.byteSize()} bytes from device address {@code src} into host memory, blocking. */
    public void copyToHost(long src, MemorySegment dst) {
        check(calls.memcpy(dst.address(), src, dst.byteSize(), RuntimeCalls.MEMCPY_DEVICE_TO_HOST), "Memcpy");
    }

    /** Copies host memory into device address {@code dst}, blocking. */
    public void copyFromHost(MemorySegment src, long dst) {
        check(calls.memcpy(dst, src.address(), src.byteSize(), RuntimeCalls.MEMCPY_HOST_TO_DEVICE), "Memcpy");
    }

    /** The runtime's name for an error code, {@code hipErrorNoDevice}. */
    public String errorName(int code) {
        String name = calls.errorName(code);
        return name != null ? name : platform.prefix() + "Error" + code;
    }

    /** The runtime's description of an error code. */
    public String errorString(int code) {
        return calls.errorString(code);
    }

    @Override
    public String toString() {
        return "GpuRuntime[" + platform.prefix() + ", " + calls.library() + "]";
    }

    RuntimeCalls calls() {
        return calls;
    }

    /** The one checker: a non-zero code becomes a {@link GpuException} naming the runtime's error. */
    void check(int code, String call) {
        if (code != RuntimeCalls.SUCCESS) {
            throw failure(code, call);
        }
    }

    GpuException failure(int code, String call) {
        return new GpuException(code, errorName(code), errorString(code), calls.symbol(call));
    }

    float floatOut(String call, ToIntFunction<MemorySegment> body) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_FLOAT);
            check(body.applyAsInt(out), call);
            return out.get(JAVA_FLOAT, 0);
        }
    }

    /** A handle or device address the call writes through its pointer argument. */
    private long addressOut(String call, ToIntFunction<MemorySegment> body) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check(body.applyAsInt(out), call);
            return out.get(ADDRESS, 0).address();
        }
    }

    private int intOut(String call, ToIntFunction<MemorySegment> body) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check(body.applyAsInt(out), call);
            return out.get(JAVA_INT, 0);
        }
    }
}
