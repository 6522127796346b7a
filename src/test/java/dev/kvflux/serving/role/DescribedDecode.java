package dev.kvflux.serving.role;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.transfer.Incarnation;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.List;

/**
 * What a test standing in for decode sends prefill: block lists carrying a KV region registered on a simulated
 * xGMI engine of its own, as a decode instance's do (prefill writes nowhere else).
 */
final class DescribedDecode {
    private static final SimulatedXgmiEngine ENGINE = SimulatedXgmiEngine.create();
    private static final int BLOCKS = 1024;

    private DescribedDecode() {
    }

    /** A region of {@value #BLOCKS} blocks per layer for {@code model}'s KV. */
    static KvRegion region(ServingModel model) {
        MemoryRegion region = ENGINE.registerMemory((long) model.layers() * BLOCKS * model.blockBytes(), 1);
        return new KvRegion(SimulatedXgmiEngine.BACKEND, ENGINE.engineDescriptor(), ENGINE.memoryDescriptor(region),
                BLOCKS, model.blockBytes());
    }

    /** {@code remote_blocks} for {@code id} from decode incarnation {@code incarnation}, with its region. */
    static NotifyMessage.RemoteBlocks blocks(ServingModel model, String id, List<Long> blocks, long incarnation) {
        return new NotifyMessage.RemoteBlocks(id, id, blocks, 0, incarnation, region(model));
    }

    /** As {@link #blocks(ServingModel, String, List, long)}, from a fresh incarnation. */
    static NotifyMessage.RemoteBlocks blocks(ServingModel model, String id, List<Long> blocks) {
        return blocks(model, id, blocks, Incarnation.next());
    }
}
