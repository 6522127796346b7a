package dev.kvflux.transfer;

import dev.kvflux.bindings.BatchPlan;
import java.util.List;
import java.util.Objects;

/**
 * Where a request's KV lives in a side's registered region, and so which copies move one layer of it: given the
 * blocks prefill allocated and the blocks decode granted, {@link #layerPlan} is the layer's batch of copies.
 *
 * <p>{@link #rows} is MoRIIO's layout: one region per instance holding, for every layer, a row of
 * {@code rowBlocks} blocks of {@code blockBytes} each; block {@code b} of layer {@code l} starts at
 * {@code (l * rowBlocks + b) * blockBytes}. Both sides must use the same layout (the same row length), so that
 * prefill can address decode's blocks whatever number of blocks either side allocates from. An embedder with
 * another layout (several regions, per-head strides) implements the interface.
 */
public interface KvLayout {

    /** How many layers a request's KV has. */
    int layers();

    /** The size of the region this layout addresses, in bytes (what a side registers with its engine). */
    long regionBytes();

    /**
     * How many blocks a side may allocate from with this layout: block ids run from 0 to one less. A side with more
     * blocks than this is refused when it is built. Unbounded unless the layout says otherwise.
     */
    default int blockCapacity() {
        return Integer.MAX_VALUE;
    }

    /**
     * The copies of one layer: the request's blocks on prefill ({@code localBlocks}) into decode's
     * ({@code remoteBlocks}), pairwise, as many as the shorter list has.
     */
    BatchPlan layerPlan(int layer, List<Long> localBlocks, List<Long> remoteBlocks);

    /**
     * The copies of one layer from this layout's blocks into another side's region laid out as {@code remote}
     * (a decode whose rows are of another length). By default only {@code remote} equal to this layout is
     * supported.
     *
     * @throws IllegalArgumentException if this layout cannot address {@code remote}'s region
     */
    default BatchPlan layerPlan(int layer, List<Long> localBlocks, KvLayout remote, List<Long> remoteBlocks) {
        if (remote != null && !remote.equals(this)) {
            throw new IllegalArgumentException("this KV layout cannot write into a region laid out as " + remote);
        }
        return layerPlan(layer, localBlocks, remoteBlocks);
    }

    /**
     * MoRIIO's layout: {@code layers} rows of {@code rowBlocks} blocks of {@code blockBytes} bytes, one copy per
     * block.
     *
     * @throws IllegalArgumentException if a value is not positive or the region would pass {@code Long.MAX_VALUE} bytes
     */
    static KvLayout rows(int layers, int rowBlocks, long blockBytes) {
        return new Rows(layers, rowBlocks, blockBytes);
    }

    /** {@link #rows}: layer-major rows of equal blocks. */
    record Rows(int layers, int rowBlocks, long blockBytes) implements KvLayout {
        public Rows {
            if (layers < 1 || rowBlocks < 1 || blockBytes < 1) {
                throw new IllegalArgumentException("a KV layout needs at least one layer, one block per row and one byte"
                        + " per block, got " + layers + " layers, " + rowBlocks + " blocks per row, " + blockBytes
                        + " bytes per block");
            }
            if ((double) layers * rowBlocks * blockBytes > Long.MAX_VALUE) {
                throw new IllegalArgumentException("a KV layout of " + layers + " layers x " + rowBlocks + " blocks x "
                        + blockBytes + " bytes is too large to address");
            }
        }

        @Override
        public long regionBytes() {
            return (long) layers * rowBlocks * blockBytes;
        }

        /** One row's blocks: a block id is its position in every layer's row. */
        @Override
        public int blockCapacity() {
            return rowBlocks;
        }

        @Override
        public BatchPlan layerPlan(int layer, List<Long> localBlocks, List<Long> remoteBlocks) {
            Objects.checkIndex(layer, layers);
            int n = Math.min(localBlocks.size(), remoteBlocks.size());
            long[] local = new long[n];
            long[] remote = new long[n];
            long[] sizes = new long[n];
            long row = (long) layer * rowBlocks;
            for (int i = 0; i < n; i++) {
                local[i] = (row + block(localBlocks.get(i))) * blockBytes;
                remote[i] = (row + block(remoteBlocks.get(i))) * blockBytes;
                sizes[i] = blockBytes;
            }
            return BatchPlan.of(local, remote, sizes);
        }

        /** Between rows of any lengths, as long as both have this layout's layers and block size. */
        @Override
        public BatchPlan layerPlan(int layer, List<Long> localBlocks, KvLayout remote, List<Long> remoteBlocks) {
            if (remote == null || remote.equals(this)) {
                return layerPlan(layer, localBlocks, remoteBlocks);
            }
            if (!(remote instanceof Rows theirs) || theirs.layers != layers || theirs.blockBytes != blockBytes) {
                throw new IllegalArgumentException("prefill's KV of " + layers + " layers of " + blockBytes
                        + "-byte blocks cannot be written into a region laid out as " + remote);
            }
            Objects.checkIndex(layer, layers);
            int n = Math.min(localBlocks.size(), remoteBlocks.size());
            long[] local = new long[n];
            long[] remoteOffsets = new long[n];
            long[] sizes = new long[n];
            for (int i = 0; i < n; i++) {
                local[i] = ((long) layer * rowBlocks + block(localBlocks.get(i))) * blockBytes;
                remoteOffsets[i] = ((long) layer * theirs.rowBlocks + theirs.block(remoteBlocks.get(i))) * blockBytes;
                sizes[i] = blockBytes;
            }
            return BatchPlan.of(local, remoteOffsets, sizes);
        }

        /** Where block {@code id} of {@code layer} starts in the region. */
        public long offset(int layer, long id) {
            Objects.checkIndex(layer, layers);
            return ((long) layer * rowBlocks + block(id)) * blockBytes;
        }

        private long block(long id) {
            if (id < 0 || id >= rowBlocks) {
                throw new IllegalArgumentException("block " + id + " is outside the layout's rows of " + rowBlocks
                        + " blocks");
            }
            return id;
        }
    }
}
