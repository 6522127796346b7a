package dev.kvflux.bindings.gpu;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The scatter/gather kernel ({@code bindings/native/gpu/kvflux_scatter_gather.cu}, shipped as PTX in the
 * jar) loaded into the current device's context through the driver API. One launch copies every segment
 * of a batch; see {@link CopyPlan#metadata} for the metadata it reads. Launching is thread-safe.
 */
final class ScatterGatherKernel implements AutoCloseable {
    /** The PTX's name in the jar, beside this class. */
    static final String RESOURCE = "kvflux_scatter_gather.ptx";
    static final String ENTRY = "kvflux_scatter_gather";
    /** Threads per block; each moves 16 bytes per step on the vector path. */
    static final int THREADS = 256;
    /** Bytes one block copies of a segment before moving to its next chunk (the kernel's KVFLUX_SG_CHUNK). */
    static final long CHUNK = 65536;
    /** The grid's y dimension at most. */
    static final int MAX_CHUNKS = 65535;

    private final CudaDriver driver;
    private final long module;
    private final long function;
    private final AtomicBoolean closed = new AtomicBoolean();

    private ScatterGatherKernel(CudaDriver driver, long module, long function) {
        this.driver = driver;
        this.module = module;
        this.function = function;
    }

    /**
     * Loads the kernel into {@code device}'s context (the runtime's primary one), for a GPU copy engine.
     *
     * @throws IllegalArgumentException if the runtime is not CUDA's: the kernel is PTX, loaded through the driver API
     */
    static ScatterGatherKernel loadOn(GpuRuntime runtime, int device) {
        if (runtime.platform() != GpuPlatform.CUDA) {
            throw new IllegalArgumentException("the scatter/gather copy path is built for CUDA (PTX, driver API);"
                    + " on " + runtime.platform().prefix() + " leave the scatter/gather threshold unset");
        }
        CudaDriver driver = CudaDriver.load();
        runtime.setDevice(device);
        return load(driver);
    }

    /**
     * Loads the kernel into the calling thread's current context (select the device through the runtime
     * first).
     *
     * @throws IllegalStateException if the jar has no PTX (it was built without nvcc)
     * @throws GpuException if the driver rejects the module
     */
    static ScatterGatherKernel load(CudaDriver driver) {
        byte[] ptx = ptx();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment image = arena.allocate(ptx.length + 1L);
            MemorySegment.copy(ptx, 0, image, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, ptx.length);
            long module = driver.handleOut("cuModuleLoadData", out -> driver.calls().moduleLoadData(out, image));
            try {
                MemorySegment name = arena.allocateFrom(ENTRY);
                long function = driver.handleOut("cuModuleGetFunction",
                        out -> driver.calls().moduleGetFunction(out, module, name));
                return new ScatterGatherKernel(driver, module, function);
            } catch (RuntimeException e) {
                driver.calls().moduleUnload(module);
                throw e;
            }
        }
    }

    /** The kernel's PTX from the jar. */
    static byte[] ptx() {
        try (InputStream in = ScatterGatherKernel.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("this kvflux build has no scatter/gather kernel ("
                        + ScatterGatherKernel.class.getPackageName().replace('.', '/') + "/" + RESOURCE
                        + " is not on the class path): it was built where nvcc was missing; build it with the CUDA"
                        + " toolkit installed (nvcc on the PATH, $NVCC or /usr/local/cuda/bin/nvcc), or leave the"
                        + " scatter/gather threshold unset");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("reading the scatter/gather kernel's PTX: " + e.getMessage(), e);
        }
    }

    /** The grid's y dimension for segments of at most {@code largest} bytes. */
    static int chunks(long largest) {
        return (int) Math.clamp((largest + CHUNK - 1) / CHUNK, 1, MAX_CHUNKS);
    }

    /**
     * Queues one launch on {@code stream} copying {@code segments} segments from device address {@code src}
     * to {@code dst} as the metadata at device address {@code meta} says.
     */
    void launch(GpuStream stream, long src, long dst, long meta, int segments, long largest) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment values = arena.allocate(32, 8);
            values.set(JAVA_LONG, 0, src);
            values.set(JAVA_LONG, 8, dst);
            values.set(JAVA_LONG, 16, meta);
            values.set(JAVA_INT, 24, segments);
            MemorySegment params = arena.allocate(ADDRESS, 4);
            for (int i = 0; i < 4; i++) {
                params.setAtIndex(ADDRESS, i, values.asSlice(8L * i));
            }
            driver.check(driver.calls().launchKernel(function, segments, chunks(largest), 1, THREADS, 1, 1, 0,
                    stream.handle(), params), "cuLaunchKernel");
        }
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            driver.check(driver.calls().moduleUnload(module), "cuModuleUnload");
        }
    }
}
