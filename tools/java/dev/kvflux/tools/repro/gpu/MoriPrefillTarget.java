package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.bindings.mori.MemoryLocation;
import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.bindings.mori.MoriIoException;
import dev.kvflux.bindings.mori.MoriStatus;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.mori.PushMode;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.repro.RecordingSession;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproStrategy;
import dev.kvflux.tools.repro.ReproTarget;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * Prefill's side of a {@link MoriReproBackend} run: its MoRI engine with a buffer on prefill's GPU, a
 * session into decode's buffer, the stand-in forward pass (a
 * stream that fills each layer's blocks and records the layer's event), and after each wait the byte check
 * and the handle count. Used from one thread, as {@link dev.kvflux.tools.repro.ReproRun} does.
 */
final class MoriPrefillTarget implements ReproTarget {
    private static final String KEY = "kvflux-repro-p";
    /** How long past the transfer timeout a request's copies may still run before MoRI is taken as hung. */
    private static final Duration HANG_MARGIN = Duration.ofSeconds(10);
    /** How long after a wait the run waits for the batches' copy-end times to be recorded. */
    private static final Duration COPY_END_GRACE = Duration.ofMillis(100);

    private final MoriIo io;
    private final GpuRuntime runtime;
    private final ReproGeometry g;
    private final int gpu;
    private final MoriDecodeSide decode;
    private final Duration transferTimeout;
    private final Owned owned = new Owned();
    private final DeviceBuffer src;
    private final NativeTransferEngine engine;
    private final TransferSession session;
    private final GpuStream compute;
    private final GpuEvent[] layerReady;
    private final DeviceBuffer forward; // null: no stand-in forward pass beyond the fills
    private final long handlesBetweenRequests;
    private final List<MoriStatus> posted = new ArrayList<>();
    private long request = -1;
    private boolean closed;
    private boolean check = true;
    /** Whether this MoRI carries kvflux's completion hook: then push and copy-end times; else MoRI's model only. */
    private final boolean hooked;

    /**
     * @param forwardBytes bytes of scratch the stand-in forward pass writes per layer before the layer's
     *     fills, and once more after the last layer (the model's tail); 0: the fills alone
     */
    MoriPrefillTarget(MoriIo io, GpuRuntime runtime, ReproGeometry g, int gpu, MoriDecodeSide decode,
            Duration transferTimeout, long forwardBytes) {
        this.io = io;
        this.runtime = runtime;
        this.g = g;
        this.gpu = gpu;
        this.decode = decode;
        this.transferTimeout = transferTimeout;
        try {
            src = own(runtime.allocate(gpu, g.regionBytes()));
            engine = own(NativeTransferEngine.mori(KEY, "127.0.0.1", 0));
            runtime.setDevice(gpu); // MoRI looks up the allocation's range in the current device's context
            MemoryRegion local = engine.registerMemory(MoriDecodeSide.segment(src), gpu, MemoryLocation.GPU);
            engine.importEngine(decode.engineDescriptor());
            decode.knowPrefill(engine.exportEngine());
            MemoryRegion remote = engine.importMemory(decode.memoryDescriptor());
            session = new RecordingSession(engine.createSession(local, remote), posted::add);
            compute = own(runtime.createStream(gpu));
            forward = forwardBytes > 0 ? own(runtime.allocate(gpu, forwardBytes)) : null;
            layerReady = new GpuEvent[g.layers()];
            for (int l = 0; l < g.layers(); l++) {
                layerReady[l] = own(runtime.createEvent(gpu, false));
            }
            hooked = canHook(engine);
            handlesBetweenRequests = io.liveHandles().orElseThrow(() -> new IllegalStateException(
                    io.library() + " keeps no count of its handles; rebuild it with bindings/native/mori/build.sh"));
        } catch (RuntimeException e) {
            release();
            throw e;
        }
    }

    /** Whether the engine accepts {@link PushMode#TIMES}: the MoRI under the shim has kvflux's completion hook. */
    private static boolean canHook(NativeTransferEngine engine) {
        try {
            engine.engine().push(PushMode.TIMES);
            return true;
        } catch (MoriIoException e) {
            System.err.println("mori: " + e.getMessage() + "; reactive-push is polled, and no detection lag is known");
            return false;
        }
    }

    /**
     * With kvflux's completion hook: {@link PushMode#ON} for the strategies that wait for pushes, {@link PushMode#TIMES}
     * for the others (their statuses complete by queries, as on MoRI without the hook, and only the copies' end is
     * recorded, for the detection lag).
     */
    @Override
    public void startStrategy(ReproStrategy strategy) {
        if (hooked) {
            engine.engine().push(strategy.push() ? PushMode.ON : PushMode.TIMES);
        }
    }

    /**
     * One untimed request polled and, with the hook, one pushed, as on the CUDA engine: without them the first timed
     * wait of a run paid for the code and the shim's paths run for the first time (5.7 to 6.5 ms on an H100, the
     * maximum of the strategy timed first).
     */
    @Override
    public List<ReproStrategy> warmUp() {
        return hooked ? List.of(ReproStrategy.REACTIVE, ReproStrategy.REACTIVE_PUSH) : List.of(ReproStrategy.REACTIVE);
    }

    /** Every batch's copy-end time is recorded on the shim's notification thread, just after the copies end. */
    @Override
    public Duration copyEndGrace() {
        return hooked ? COPY_END_GRACE : Duration.ZERO;
    }

    @Override
    public Map<String, Object> setup() {
        return Map.of("completion_hook", hooked ? "yes" : "no (MoRI built without kvflux's patch)");
    }

    private <T extends AutoCloseable> T own(T resource) {
        return owned.add(resource);
    }

    @Override
    public TransferEngine engine() {
        return engine;
    }

    @Override
    public TransferSession session() {
        return session;
    }

    /**
     * Returns layer {@code layer}'s event; the run posts the layer once it is ready. At a request's first
     * layer the whole stand-in forward pass is queued on prefill's stream, layer after layer: the scratch
     * writes, each block filled with its value for this request, the layer's event; then the tail. So, as in
     * a real prefill, the GPU runs ahead of the posting thread, which waits for each layer's event, and
     * MoRI's copies share the GPU with the layers still computing. Requests are counted across strategies,
     * so every request writes its own bytes.
     */
    @Override
    public LayerEvent layerEvent(int ignoredRequest, int layer) {
        if (layer == 0) {
            request++;
            queueForwardPass();
        }
        return layerReady[layer];
    }

    private void queueForwardPass() {
        runtime.setDevice(gpu);
        for (int l = 0; l < g.layers(); l++) {
            if (forward != null) {
                compute.memsetAsync(forward.address(), l & 0xFF, forward.size());
            }
            BatchPlan plan = g.plan(l);
            for (int b = 0; b < plan.blocks(); b++) {
                compute.memsetAsync(src.address() + plan.localOffset(b), ByteVerifier.fill(request, l, b), g.blockBytes());
            }
            layerReady[l].record(compute);
        }
        if (forward != null) {
            compute.memsetAsync(forward.address(), 0, forward.size());
        }
    }

    /** Untimed requests are not checked byte by byte: decode's check takes longer than the request. */
    @Override
    public void warmingUp(boolean untimed) {
        check = !untimed;
    }

    /**
     * After a wait: waits for the request's copies to end (a wait that gave up leaves them running), has
     * decode check its bytes (not while {@linkplain #warmingUp warming up}), releases the request's statuses and
     * counts the MoRI handles still open.
     */
    @Override
    public Map<String, Object> afterWait(int ignoredRequest) {
        int unfinished = awaitCopies();
        ControlChannel.Verdict verdict = check ? decode.verify(request)
                : new ControlChannel.Verdict(request, 0, 0, 0, 0);
        posted.forEach(MoriStatus::close);
        posted.clear();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("copies_in_flight_at_wait_end", unfinished);
        figures.put("mismatched_bytes", verdict.mismatchedBytes());
        figures.put("leaked_handles", io.liveHandles().orElseThrow() - handlesBetweenRequests);
        return figures;
    }

    /** Polls every posted status until none is in flight; returns how many were still in flight at the first poll. */
    private int awaitCopies() {
        long deadline = System.nanoTime() + transferTimeout.plus(HANG_MARGIN).toNanos();
        int inFlightAtFirstPoll = -1;
        while (true) {
            int inFlight = 0;
            for (MoriStatus status : posted) {
                StatusCode code = status.code();
                if (code == StatusCode.INIT || code == StatusCode.IN_PROGRESS) {
                    inFlight++;
                }
            }
            if (inFlightAtFirstPoll < 0) {
                inFlightAtFirstPoll = inFlight;
            }
            if (inFlight == 0) {
                return inFlightAtFirstPoll;
            }
            if (System.nanoTime() - deadline >= 0) {
                throw new IllegalStateException(inFlight + " of request " + request + "'s batches were still in flight "
                        + Durations.format(transferTimeout.plus(HANG_MARGIN)) + " after its wait ended: MoRI's copies"
                        + " look hung; stopping the run");
            }
            LockSupport.parkNanos(100_000);
        }
    }

    /**
     * Releases prefill's statuses, session, engine and GPU resources, then decode's side, then checks that no
     * MoRI handle is left open in this process.
     *
     * @throws IllegalStateException if handles were left open, here or in decode
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            posted.forEach(MoriStatus::close);
            posted.clear();
            release();
        } finally {
            decode.close();
        }
        long open = io.liveHandles().orElse(-1);
        System.err.println("mori: MoRI handles open in prefill's process after the run: " + open);
        if (open != 0) {
            throw new IllegalStateException(open + " MoRI handles were left open after the run");
        }
    }

    /** Everything this side created, newest first (the engine releases its memory, session and statuses). */
    private void release() {
        owned.closeAll();
    }
}
