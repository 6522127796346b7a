package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MemoryLocation;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.tools.repro.ReproGeometry;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Decode's side of a {@link MoriReproBackend} run: a MoRI engine with a zeroed buffer of the geometry's
 * region size registered on decode's GPU, in this process or in a child process.
 * Prefill gets its packed descriptors, gives it prefill's engine descriptor, and asks it after each wait
 * to check the bytes it received. Not thread-safe: one call at a time.
 */
interface MoriDecodeSide extends AutoCloseable {

    /** The MoRI engine key of decode's engine. */
    String KEY = "kvflux-repro-d";

    /** Decode's packed {@code EngineDesc}. */
    byte[] engineDescriptor();

    /** The packed {@code MemoryDesc} of decode's buffer. */
    byte[] memoryDescriptor();

    /** Makes decode's engine know prefill's, from its packed {@code EngineDesc}. */
    void knowPrefill(byte[] prefillEngineDescriptor);

    /** Decode's check of request {@code request}'s bytes (see {@link ByteVerifier}). */
    ControlChannel.Verdict verify(long request);

    /**
     * Releases decode's engine and buffer, then checks that no MoRI handle is left open on decode's side.
     *
     * @throws IllegalStateException if decode left handles open or its process failed
     */
    @Override
    void close();

    /** Decode in this process: a second engine, its buffer on {@code gpu}. */
    static MoriDecodeSide inProcess(GpuRuntime runtime, ReproGeometry g, int gpu) {
        return new InProcess(runtime, g, gpu);
    }

    /**
     * Decode in a child process ({@link MoriDecode}) on {@code gpu}, its descriptors sent over loopback TCP.
     *
     * @param log where the child's start is reported
     */
    static MoriDecodeSide child(GpuRuntime runtime, ReproGeometry g, int gpu, PrintStream log) throws IOException {
        return Child.start(runtime, g, gpu, log);
    }

    /** The device buffer as a segment MoRI can register (its address and size; never dereferenced here). */
    static MemorySegment segment(DeviceBuffer buffer) {
        return MemorySegment.ofAddress(buffer.address()).reinterpret(buffer.size());
    }

    /** Decode's engine and buffer: registered on the decode GPU, on the calling thread. */
    final class Registered implements AutoCloseable {
        final DeviceBuffer buffer;
        final NativeTransferEngine engine;
        final MemoryRegion region;

        Registered(GpuRuntime runtime, ReproGeometry g, int gpu) {
            buffer = runtime.allocate(gpu, g.regionBytes());
            NativeTransferEngine created = null;
            try {
                created = NativeTransferEngine.mori(KEY, "127.0.0.1", 0);
                runtime.setDevice(gpu); // MoRI looks up the allocation's range in the current device's context
                region = created.registerMemory(segment(buffer), gpu, MemoryLocation.GPU);
                engine = created;
            } catch (RuntimeException e) {
                if (created != null) {
                    created.close();
                }
                buffer.close();
                throw e;
            }
        }

        @Override
        public void close() {
            try {
                engine.close();
            } finally {
                buffer.close();
            }
        }
    }

    /** Both engines in one process. */
    final class InProcess implements MoriDecodeSide {
        private final GpuRuntime runtime;
        private final Registered decode;
        private final Arena arena = Arena.ofShared();
        private final MemorySegment host;
        private final ByteVerifier verifier;

        InProcess(GpuRuntime runtime, ReproGeometry g, int gpu) {
            this.runtime = runtime;
            this.decode = new Registered(runtime, g, gpu);
            this.host = arena.allocate(g.regionBytes(), 4096);
            this.verifier = new ByteVerifier(g, arena);
        }

        @Override
        public byte[] engineDescriptor() {
            return decode.engine.exportEngine();
        }

        @Override
        public byte[] memoryDescriptor() {
            return decode.engine.exportMemory(decode.region);
        }

        @Override
        public void knowPrefill(byte[] prefillEngineDescriptor) {
            decode.engine.importEngine(prefillEngineDescriptor);
        }

        @Override
        public ControlChannel.Verdict verify(long request) {
            long start = System.nanoTime();
            runtime.setDevice(decode.buffer.device());
            runtime.copyToHost(decode.buffer.address(), host);
            double copyBackMs = (System.nanoTime() - start) / 1e6;
            ByteVerifier.Result r = verifier.check(host, request);
            return new ControlChannel.Verdict(request, r.checkedBytes(), r.mismatchedBytes(), r.badLayers(), copyBackMs);
        }

        @Override
        public void close() {
            try {
                decode.close();
            } finally {
                arena.close();
            }
        }
    }

    /** Decode in a child process, reached over the reproducer's control link. */
    final class Child implements MoriDecodeSide {
        private final Process process;
        private final ControlChannel channel;
        private final byte[] engine;
        private final byte[] memory;
        private boolean closed;

        private Child(Process process, ControlChannel channel, byte[] engine, byte[] memory) {
            this.process = process;
            this.channel = channel;
            this.engine = engine;
            this.memory = memory;
        }

        static Child start(GpuRuntime runtime, ReproGeometry g, int gpu, PrintStream log) throws IOException {
            return DecodeChild.connect(port -> new DecodeChild.Args(DecodeChild.Engine.MORI, runtime.platform(), gpu, g,
                    port), (process, channel) -> {
                        byte[] engine = channel.receiveDescriptor();
                        byte[] memory = channel.receiveDescriptor();
                        log.printf(Locale.ROOT, "mori: decode (pid %d) registered %.1f MiB on GPU %d with MoRI and"
                                + " sent its descriptors (%d + %d bytes)%n", process.pid(),
                                g.regionBytes() / 1048576.0, gpu, engine.length, memory.length);
                        return new Child(process, channel, engine, memory);
                    });
        }

        @Override
        public byte[] engineDescriptor() {
            return engine.clone();
        }

        @Override
        public byte[] memoryDescriptor() {
            return memory.clone();
        }

        @Override
        public void knowPrefill(byte[] prefillEngineDescriptor) {
            try {
                channel.sendDescriptor(prefillEngineDescriptor);
            } catch (IOException e) {
                throw new UncheckedIOException("the decode process did not take prefill's descriptor: "
                        + e.getMessage(), e);
            }
        }

        @Override
        public ControlChannel.Verdict verify(long request) {
            return channel.verify(request);
        }

        /** Tells decode to stop and waits a minute at most; its exit code says whether it left handles open. */
        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            int code;
            try {
                channel.sendDone();
                channel.close();
                if (!process.waitFor(60, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    throw new IllegalStateException("the decode process did not stop within 60 s of being told to");
                }
                code = process.exitValue();
            } catch (IOException e) {
                process.destroyForcibly();
                throw new IllegalStateException("the decode process could not be told to stop: " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                process.destroyForcibly();
                throw new IllegalStateException("interrupted while the decode process stopped", e);
            }
            if (code == MoriDecode.EXIT_LEAKED) {
                throw new IllegalStateException("the decode process left MoRI handles open (its output says how many)");
            }
            if (code != 0) {
                throw new IllegalStateException("the decode process exited with code " + code + " (its output is above)");
            }
        }
    }
}
