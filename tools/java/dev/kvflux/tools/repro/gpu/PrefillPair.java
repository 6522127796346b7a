package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuCopyEngine.GpuSession;
import dev.kvflux.bindings.gpu.GpuCopyEngine.WriteOptions;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuMemoryDescriptor;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.Stats;
import dev.kvflux.tools.repro.ReproGeometry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The prefill side of a two-process GPU pair: it starts the decode child on the decode GPU (same java,
 * same class path), receives its memory descriptor over loopback TCP, opens it through a
 * {@link GpuCopyEngine}, and then, request by request, fills each layer's blocks on a compute stream (the
 * stand-in forward pass), posts the layer's batch behind the layer's event with timing events around its
 * copies, and after the wait measures the copy time and the detection lag and has decode check the bytes.
 *
 * <p>Not thread-safe: one request at a time, from one thread.
 */
final class PrefillPair implements AutoCloseable {

    /** What one request measured once its wait ended. */
    record Measurement(double rawCopyMs, double layerCopyMs, double copyEndAfterWaitStartMs, double lagMs,
            long verifiedBytes, long mismatchedBytes, int badLayers, long lastCopyEndNanos) {
    }

    /** How long past the transfer timeout a request's copies may still run before the GPU is taken as hung. */
    static final Duration HANG_MARGIN = Duration.ofSeconds(10);

    /** Queries of a copy-end event spent spinning before the poll parks between queries. */
    private static final int SPINS = 1000;

    /** The pause between queries once spinning is over. */
    private static final long PARK_NANOS = 100_000;

    private final GpuRuntime runtime;
    private final ReproGeometry layout;
    private final int gpu;
    private final Process child;
    private final ControlChannel channel;
    private final GpuCopyEngine engine;
    private final GpuSession session;
    private final long base;
    private final Owned owned = new Owned();
    private final GpuStream compute;
    private final GpuStream anchor;
    private final DeviceBuffer forward;
    private final GpuEvent reference;
    private final GpuEvent[] layerReady;
    private final GpuEvent[] copyStart;
    private final GpuEvent[] copyEnd;
    private final Duration transferTimeout;
    private long t0;
    private boolean closed;
    private boolean hung;

    private PrefillPair(GpuRuntime runtime, ReproGeometry layout, int gpu, Process child, ControlChannel channel,
            GpuMemoryDescriptor remoteDescriptor, long forwardBytes, GpuCopyEngine.Config config,
            Duration transferTimeout) {
        this.runtime = runtime;
        this.transferTimeout = transferTimeout;
        this.layout = layout;
        this.gpu = gpu;
        this.child = child;
        this.channel = channel;
        this.engine = GpuCopyEngine.open(runtime, "prefill", gpu, config);
        try {
            MemoryRegion local = engine.registerMemory(layout.regionBytes(), gpu);
            MemoryRegion remote = engine.registerRemote(remoteDescriptor);
            this.session = engine.createSession(local, remote);
            this.base = engine.buffer(local).address();
            this.compute = own(runtime.createStream(gpu));
            this.anchor = own(runtime.createStream(gpu));
            this.forward = forwardBytes > 0 ? own(runtime.allocate(gpu, forwardBytes)) : null;
            this.reference = own(runtime.createEvent(gpu, true));
            this.layerReady = new GpuEvent[layout.layers()];
            this.copyStart = new GpuEvent[layout.layers()];
            this.copyEnd = new GpuEvent[layout.layers()];
            for (int l = 0; l < layout.layers(); l++) {
                layerReady[l] = own(runtime.createEvent(gpu, false));
                copyStart[l] = own(runtime.createEvent(gpu, true));
                copyEnd[l] = own(runtime.createEvent(gpu, true));
            }
        } catch (RuntimeException e) {
            releaseGpu();
            throw e;
        }
    }

    /**
     * Starts the decode child on {@code decodeGpu} and opens its buffer from {@code prefillGpu}.
     *
     * @param forwardBytes bytes of scratch the compute stream writes per layer before the layer's fills (0: none)
     * @param config the prefill engine's pools and copy path
     * @param transferTimeout the run's transfer timeout; with {@link #HANG_MARGIN} it bounds how long
     *     {@link #finish} waits for a request's copies
     * @param log where the decode child's start is reported
     */
    static PrefillPair open(GpuRuntime runtime, ReproGeometry layout, int prefillGpu, int decodeGpu, long forwardBytes,
            GpuCopyEngine.Config config, Duration transferTimeout, java.io.PrintStream log) throws IOException {
        return DecodeChild.connect(port -> new DecodeChild.Args(DecodeChild.Engine.GPU, runtime.platform(), decodeGpu,
                layout, port), (child, channel) -> {
                    GpuMemoryDescriptor remote = GpuMemoryDescriptor.unpack(channel.receiveDescriptor());
                    log.printf(java.util.Locale.ROOT, "decode (pid %d) registered %.1f MiB on GPU %d and sent its IPC"
                            + " handle%n", child.pid(), remote.size() / 1048576.0, remote.device());
                    return new PrefillPair(runtime, layout, prefillGpu, child, channel, remote, forwardBytes, config,
                            transferTimeout);
                });
    }

    GpuCopyEngine engine() {
        return engine;
    }

    GpuSession session() {
        return session;
    }

    /** Marks the start of a request on the GPU clock and the host clock. */
    void startRequest() {
        runtime.setDevice(gpu);
        reference.record(anchor);
        t0 = System.nanoTime();
    }

    /** The stand-in forward pass of one layer: scratch work, then each block filled, then the layer's event. */
    void fill(long request, int layer) {
        runtime.setDevice(gpu);
        if (forward != null) {
            compute.memsetAsync(forward.address(), layer & 0xFF, forward.size());
        }
        for (int b = 0; b < layout.blocks(); b++) {
            compute.memsetAsync(base + layout.offset(layer, b), ByteVerifier.fill(request, layer, b), layout.blockBytes());
        }
        layerReady[layer].record(compute);
    }

    /** Posts layer {@code layer}'s batch behind its event, with timing events around its copies. */
    PushedStatus write(int layer, long transferUid, boolean push) {
        return session.write(layout.plan(layer), transferUid,
                new WriteOptions(layerReady[layer], copyStart[layer], copyEnd[layer], push));
    }

    /**
     * After a request's wait (which ran from {@code waitStart} to {@code waitEnd}, host nanoseconds):
     * waits for its copies, reads the timing events, and, if {@code check}, has decode check its bytes (unchecked:
     * a verdict of 0 bytes checked).
     *
     * @throws IllegalStateException if the copies are not done by the transfer timeout plus
     *     {@link #HANG_MARGIN} after {@code waitStart}: the GPU is taken as hung, and {@link #close} then
     *     leaves the GPU memory to the process's exit rather than wait for the hung work
     */
    Measurement finish(long request, long waitStart, long waitEnd, boolean check) {
        runtime.setDevice(gpu);
        double firstStart = Double.MAX_VALUE;
        double lastEnd = 0;
        double[] perLayer = new double[layout.layers()];
        long deadline = waitStart + transferTimeout.toNanos() + HANG_MARGIN.toNanos();
        for (int l = 0; l < layout.layers(); l++) {
            int layer = l;
            try {
                awaitReady(copyEnd[l], deadline, System::nanoTime, () -> "the copies of layer " + layer
                        + " of request " + request + " were not done " + Durations.format(transferTimeout.plus(HANG_MARGIN))
                        + " after the wait began (the transfer timeout " + Durations.format(transferTimeout) + " plus "
                        + Durations.format(HANG_MARGIN) + "): the GPU looks hung; stopping the run. Check the device"
                        + " (nvidia-smi or rocm-smi, the kernel log), or raise --transfer-timeout if copies this slow"
                        + " are expected");
            } catch (RuntimeException e) {
                hung = true;
                throw e;
            }
            double start = copyStart[l].elapsedMillisSince(reference);
            double end = copyEnd[l].elapsedMillisSince(reference);
            perLayer[l] = end - start;
            firstStart = Math.min(firstStart, start);
            lastEnd = Math.max(lastEnd, end);
        }
        double layerCopyMs = Stats.median(perLayer);
        double waitStartMs = (waitStart - t0) / 1e6;
        double waitEndMs = (waitEnd - t0) / 1e6;
        ControlChannel.Verdict verdict = check ? channel.verify(request)
                : new ControlChannel.Verdict(request, 0, 0, 0, 0);
        return new Measurement(lastEnd - firstStart, layerCopyMs, lastEnd - waitStartMs, waitEndMs - lastEnd,
                verdict.checkedBytes(), verdict.mismatchedBytes(), verdict.badLayers(), t0 + Math.round(lastEnd * 1e6));
    }

    /**
     * Frees the GPU resources, tells decode to stop, and waits for it (a minute at most). After
     * {@link #finish} found the GPU hung, the GPU resources are left to the process's exit (freeing device
     * memory waits for the work queued on it, which would hang the close too) and decode is stopped at once.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (!hung) {
                releaseGpu();
            }
        } finally {
            stopDecode();
        }
    }

    /**
     * Polls {@code event} until it is ready: spinning for the first queries, then parking briefly between
     * them, so a request's copies that are already done cost one query and a hung GPU costs no CPU.
     *
     * @param deadline the {@code clock} reading (nanoseconds) after which the event is taken as never ready
     * @throws IllegalStateException with {@code hang}'s message once {@code clock} passes {@code deadline}
     * @throws RuntimeException as {@link LayerEvent#query()} throws, if the event's work failed
     */
    static void awaitReady(LayerEvent event, long deadline, LongSupplier clock, Supplier<String> hang) {
        for (int queries = 0; event.query() != EventState.READY; queries++) {
            if (clock.getAsLong() - deadline >= 0) {
                throw new IllegalStateException(hang.get());
            }
            if (queries < SPINS) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(PARK_NANOS);
            }
        }
    }

    /** Everything this pair created on the GPU, newest first, then the engine (its buffer, the peer mapping). */
    private void releaseGpu() {
        owned.closeAll();
        engine.close();
    }

    private void stopDecode() {
        if (hung) {
            // Decode's copies came from the hung GPU: it need not be heard out.
            child.destroyForcibly();
            try {
                channel.close();
            } catch (IOException ignored) {
                // The child is gone either way.
            }
            return;
        }
        try {
            channel.sendDone();
            channel.close();
            if (!child.waitFor(60, TimeUnit.SECONDS)) {
                child.destroyForcibly();
            }
        } catch (IOException e) {
            child.destroyForcibly();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            child.destroyForcibly();
        }
    }

    /** The decode child's exit code, once it has exited. */
    int decodeExitCode() {
        return child.isAlive() ? -1 : child.exitValue();
    }

    private <T extends AutoCloseable> T own(T resource) {
        return owned.add(resource);
    }
}
