package dev.kvflux.tools.repro;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.mori.MoriSimulator;
import dev.kvflux.bindings.mori.MoriStatus;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.mori.PushMode;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A reproducer target on two {@link NativeTransferEngine}s of this process, prefill writing into decode
 * through FFM.
 *
 * <p>With host buffers on both sides (the simulator), each request's prefill blocks are filled before
 * its first layer with a pattern unique to that request (the forward pass writing the KV cache), so
 * after each wait the decode buffer is checked to hold exactly those bytes ({@code bytes_verified}).
 * On the simulator each wait also reports {@code copy_s}, from the end of posting to the last copy's
 * finish; the run takes each wait's detection lag from the statuses' copy-end times. The engine pushes completion
 * ({@link PushMode#ON}) for the strategies that wait for pushes, and only records copy-end times
 * ({@link PushMode#TIMES}) for the others, so that those keep MoRI's model. Each request's statuses are released
 * after its wait.
 */
final class NativeReproTarget implements ReproTarget {
    private final NativeTransferEngine p;
    private final NativeTransferEngine d;
    private final ReproGeometry geometry;
    private final MemorySegment src; // null unless host memory
    private final MemorySegment dst;
    private final TransferSession session;
    private final Optional<MoriSimulator> sim;
    private final List<MoriStatus> posted = new ArrayList<>();
    private long postedAtNanos;
    private int fills;
    private byte pattern;

    /**
     * Connects the two engines and opens the session from {@code local} (registered on {@code p}) to
     * {@code remote} (registered on {@code d}). {@code hostBuffers}: whether both regions are host memory
     * this process may read and write.
     */
    NativeReproTarget(NativeTransferEngine p, NativeTransferEngine d, ReproGeometry g, MemoryRegion local,
                      MemoryRegion remote, boolean hostBuffers) {
        this.p = p;
        this.d = d;
        this.geometry = g;
        this.sim = p.simulator();
        p.connect(d);
        this.src = hostBuffers ? p.buffer(local) : null;
        this.dst = hostBuffers ? d.buffer(remote) : null;
        if (dst != null) {
            forEachBlock(block -> dst.asSlice(block, g.blockBytes()).fill((byte) 0)); // resident, as GPU memory is
        }
        this.session = new RecordingSession(p.createSession(local, p.importMemory(d.exportMemory(remote))),
                this::record);
    }

    /** Over host buffers of {@code g.regionBytes()} that the engines allocate. */
    static NativeReproTarget overHostBuffers(NativeTransferEngine p, NativeTransferEngine d, ReproGeometry g) {
        return new NativeReproTarget(p, d, g, p.registerMemory(g.regionBytes(), -1),
                d.registerMemory(g.regionBytes(), -1), true);
    }

    @Override
    public TransferEngine engine() {
        return p;
    }

    @Override
    public TransferSession session() {
        return session;
    }

    @Override
    public void startStrategy(ReproStrategy strategy) {
        p.engine().push(strategy.push() ? PushMode.ON : PushMode.TIMES);
    }

    @Override
    public LayerEvent layerEvent(int request, int layer) {
        if (layer == 0 && src != null) {
            pattern = (byte) (++fills * 37 + 1);
            forEachBlock(block -> src.asSlice(block, geometry.blockBytes()).fill(pattern));
        }
        return () -> EventState.READY;
    }

    @Override
    public Map<String, Object> afterWait(int request) {
        Map<String, Object> figures = new LinkedHashMap<>();
        sim.ifPresent(s -> {
            long copied = posted.stream().mapToLong(s::finishNanos).max().orElse(postedAtNanos);
            figures.put("copy_s", Math.max(0, copied - postedAtNanos) / 1e9);
        });
        if (dst != null) {
            figures.put("bytes_verified", decodeHoldsThePattern());
        }
        posted.forEach(MoriStatus::close);
        posted.clear();
        return figures;
    }

    private boolean decodeHoldsThePattern() {
        boolean[] ok = {true};
        forEachBlock(block -> ok[0] &= dst.asSlice(block, geometry.blockBytes()).mismatch(src.asSlice(block,
                geometry.blockBytes())) == -1);
        return ok[0];
    }

    private void forEachBlock(java.util.function.LongConsumer action) {
        for (int layer = 0; layer < geometry.layers(); layer++) {
            BatchPlan plan = geometry.plan(layer);
            for (int b = 0; b < plan.blocks(); b++) {
                action.accept(plan.localOffset(b));
            }
        }
    }

    /** Keeps a posted status, and when the posting ended, for {@link #afterWait}. */
    private void record(MoriStatus status) {
        posted.add(status);
        postedAtNanos = sim.map(MoriSimulator::nowNanos).orElseGet(System::nanoTime);
    }

    @Override
    public void close() {
        try {
            p.close();
        } finally {
            d.close();
        }
    }
}
