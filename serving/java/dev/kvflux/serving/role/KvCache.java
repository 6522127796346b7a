package dev.kvflux.serving.role;

import dev.kvflux.bindings.BatchPlan;
import java.util.List;

/**
 * A simulated KV cache's layout, as MoRIIO's: one region per instance holding, for every layer, a row of
 * {@code capacity} blocks ({@link #ROW_BLOCKS} on both roles, so that prefill can address decode's blocks
 * whatever either role's {@code --kv-blocks}). Which blocks a request may use is the
 * {@link BlockAllocator}'s business.
 */
final class KvCache {
    /**
     * Blocks per layer row of the layout: the most KV blocks a role may have (2^24, as the command line
     * allows). The simulated engine allocates nothing for a region, so the layout's size costs nothing.
     */
    static final int ROW_BLOCKS = 1 << 24;

    /**
     * @throws IllegalArgumentException unless {@code kvBlocks} is in 1..{@link #ROW_BLOCKS}
     */
    static void checkBlocks(int kvBlocks) {
        if (kvBlocks < 1 || kvBlocks > ROW_BLOCKS) {
            throw new IllegalArgumentException("--kv-blocks must be in 1.." + ROW_BLOCKS + ", got " + kvBlocks);
        }
    }

    private final ServingModel model;
    private final int capacity;

    KvCache(ServingModel model, int capacity) {
        this.model = model;
        this.capacity = capacity;
    }

    /** The region size this cache needs, in bytes. */
    long regionBytes() {
        return (long) model.layers() * capacity * model.blockBytes();
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
