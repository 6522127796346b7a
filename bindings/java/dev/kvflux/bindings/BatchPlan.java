package dev.kvflux.bindings;

import java.util.Arrays;

/**
 * One batch of block copies: for each block, its offset in the local region, its offset in the remote
 * region and its size in bytes. Validated at construction so no engine ever sees lengths that differ
 * or negative values; {@link #checkWithin} checks the ranges against the two regions.
 */
public final class BatchPlan {
    private final long[] localOffsets;
    private final long[] remoteOffsets;
    private final long[] sizes;
    private final long totalBytes;

    private BatchPlan(long[] localOffsets, long[] remoteOffsets, long[] sizes) {
        this.localOffsets = localOffsets;
        this.remoteOffsets = remoteOffsets;
        this.sizes = sizes;
        long total = 0;
        for (long size : sizes) {
            total = Math.addExact(total, size);
        }
        this.totalBytes = total;
    }

    /**
     * A plan from three arrays of equal length; the arrays are copied.
     *
     * @throws IllegalArgumentException if the lengths differ, a value is negative or a size is zero
     */
    public static BatchPlan of(long[] localOffsets, long[] remoteOffsets, long[] sizes) {
        if (localOffsets.length != remoteOffsets.length || localOffsets.length != sizes.length) {
            throw new IllegalArgumentException("batch arrays differ in length: " + localOffsets.length
                    + " local offsets, " + remoteOffsets.length + " remote offsets, " + sizes.length
                    + " sizes; give one local offset, one remote offset and one size per block");
        }
        for (int i = 0; i < sizes.length; i++) {
            if (localOffsets[i] < 0 || remoteOffsets[i] < 0) {
                throw new IllegalArgumentException("block " + i + " has a negative offset (local "
                        + localOffsets[i] + ", remote " + remoteOffsets[i] + "); offsets start at 0");
            }
            if (sizes[i] <= 0) {
                throw new IllegalArgumentException("block " + i + " has size " + sizes[i]
                        + "; every block must copy at least one byte");
            }
        }
        return new BatchPlan(localOffsets.clone(), remoteOffsets.clone(), sizes.clone());
    }

    /** A plan whose local and remote offsets are the same, with one size for every block. */
    public static BatchPlan mirrored(long[] offsets, long blockSize) {
        long[] sizes = new long[offsets.length];
        Arrays.fill(sizes, blockSize);
        return of(offsets, offsets, sizes);
    }

    /**
     * Checks every block against the two regions' sizes.
     *
     * @throws IllegalArgumentException naming the first block that runs past its region
     */
    public BatchPlan checkWithin(long localSize, long remoteSize) {
        for (int i = 0; i < sizes.length; i++) {
            if (localOffsets[i] > localSize - sizes[i]) {
                throw new IllegalArgumentException("block " + i + " reads local bytes [" + localOffsets[i]
                        + ", " + (localOffsets[i] + sizes[i]) + ") past the local region's " + localSize
                        + " bytes; register a larger buffer or fix the block plan");
            }
            if (remoteOffsets[i] > remoteSize - sizes[i]) {
                throw new IllegalArgumentException("block " + i + " writes remote bytes [" + remoteOffsets[i]
                        + ", " + (remoteOffsets[i] + sizes[i]) + ") past the remote region's " + remoteSize
                        + " bytes; register a larger buffer or fix the block plan");
            }
        }
        return this;
    }

    public int blocks() {
        return sizes.length;
    }

    public long totalBytes() {
        return totalBytes;
    }

    public long localOffset(int block) {
        return localOffsets[block];
    }

    public long remoteOffset(int block) {
        return remoteOffsets[block];
    }

    public long size(int block) {
        return sizes[block];
    }

    /** Copies of the three arrays, for native calls. */
    public long[] localOffsets() {
        return localOffsets.clone();
    }

    public long[] remoteOffsets() {
        return remoteOffsets.clone();
    }

    public long[] sizes() {
        return sizes.clone();
    }

    @Override
    public String toString() {
        return "BatchPlan[" + blocks() + " blocks, " + totalBytes + " bytes]";
    }
}
