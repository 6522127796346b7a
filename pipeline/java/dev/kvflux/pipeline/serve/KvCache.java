package dev.kvflux.pipeline.serve;

import dev.kvflux.bindings.BatchPlan;
import java.util.List;

/**
 * A simulated KV cache laid out as MoRIIO's: one region per instance holding, for every layer, a row of
 * {@code capacity} blocks. Blocks are handed out round-robin; the simulation keeps no contents, so a
 * block reused while an old copy still targets it is harmless.
 */
final class KvCache {
    private final ServingModel model;
    private final int capacity;
    private long next;

    KvCache(ServingModel model, int capacity) {
        this.model = model;
        this.capacity = capacity;
    }

    /** The region size this cache needs, in bytes. */
    long regionBytes() {
        return (long) model.layers() * capacity * model.blockBytes();
    }

    /** Ids of {@code count} blocks for one request. */
    synchronized List<Long> allocate(int count) {
        Long[] blocks = new Long[count];
        for (int i = 0; i < count; i++) {
            blocks[i] = next++ % capacity;
        }
        return List.of(blocks);
    }

    /** The copies of one layer: the request's local blocks into decode's blocks, block by block. */
    BatchPlan layerPlan(int layer, List<Long> localBlocks, List<Long> remoteBlocks) {
        int n = Math.min(localBlocks.size(), remoteBlocks.size());
        long[] local = new long[n];
        long[] remote = new long[n];
        long[] sizes = new long[n];
        long row = (long) layer * capacity;
        for (int i = 0; i < n; i++) {
            local[i] = (row + localBlocks.get(i)) * model.blockBytes();
            remote[i] = (row + remoteBlocks.get(i)) * model.blockBytes();
            sizes[i] = model.blockBytes();
        }
        return BatchPlan.of(local, remote, sizes);
    }
}
