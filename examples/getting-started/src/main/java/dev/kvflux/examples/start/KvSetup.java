package dev.kvflux.examples.start;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import reactor.core.scheduler.Scheduler;

/**
 * What the README's snippets take as given, on the simulated xGMI engine: an engine, a local and a remote memory
 * region, a session between them, one {@link BatchPlan} per layer (which blocks of the layer move, at which offsets)
 * and one GPU event per layer (when the layer's KV is written and may be copied).
 *
 * <p>On a real engine the same four things come from MoRI IO or the CUDA / HIP engine: regions from
 * {@code registerMemory} over the KV cache's device memory, the session from the peer's descriptors, plans from the
 * block tables, events from the forward pass's stream.
 *
 * @param engine  the engine; close it when done
 * @param session local KV to remote KV
 * @param plans   {@code plans.get(layer)}: the blocks of one layer
 * @param events  {@code events.get(layer)}: ready once the layer's KV is written
 */
public record KvSetup(SimulatedXgmiEngine engine, TransferSession session, List<BatchPlan> plans,
                      List<LayerEvent> events) implements AutoCloseable {

    /**
     * {@code layers} layers of {@code blocks} blocks of {@code blockBytes} each; layer {@code i}'s event turns ready
     * {@code (i + 1) * layerTime} after this call, on {@code clock}, and the engine's copies run on {@code clock}
     * too. Under {@code StepVerifier.withVirtualTime} pass {@code VirtualTimeScheduler.get()}: an engine on the
     * real clock inside virtual time never finishes a copy before the wait's virtual timeout.
     *
     * @param fault a fault for one batch (see {@link Fault}), or {@code null} for none
     */
    public static KvSetup simulated(Scheduler clock, int layers, int blocks, long blockBytes, Duration layerTime,
                                    Fault fault) {
        SimulatedXgmiEngine.Builder builder = SimulatedXgmiEngine.builder().scheduler(clock);
        if (fault != null) {
            builder.fault(fault);
        }
        SimulatedXgmiEngine engine = builder.build();
        long layerBytes = blocks * blockBytes;
        MemoryRegion local = engine.registerMemory(layers * layerBytes, 0);
        MemoryRegion remote = engine.registerMemory(layers * layerBytes, 1);
        TransferSession session = engine.createSession(local, remote);
        List<BatchPlan> plans = new ArrayList<>();
        List<LayerEvent> events = new ArrayList<>();
        for (int layer = 0; layer < layers; layer++) {
            long[] offsets = new long[blocks];
            for (int block = 0; block < blocks; block++) {
                offsets[block] = layer * layerBytes + block * blockBytes;
            }
            plans.add(BatchPlan.mirrored(offsets, blockBytes));
            events.add(SimulatedLayerEvent.readyAfter(clock, layerTime.multipliedBy(layer + 1)));
        }
        return new KvSetup(engine, session, List.copyOf(plans), List.copyOf(events));
    }

    /** How many layers there are. */
    public int layers() {
        return plans.size();
    }

    @Override
    public void close() {
        engine.close();
    }
}
