package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.BatchPlan;
import java.util.Arrays;
import java.util.Comparator;

/**
 * The copies a batch becomes, as MoRI's xGMI backend plans them: blocks sorted by remote offset, and
 * neighbours that are contiguous on both sides merged into one copy. A request laid out as
 * {@code kvflux repro} lays it out (every other 32 KiB block) merges nothing: 128 blocks stay 128 copies.
 */
record CopyPlan(long[] localOffsets, long[] remoteOffsets, long[] sizes) {

    static CopyPlan of(BatchPlan plan) {
        int n = plan.blocks();
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        Arrays.sort(order, Comparator.comparingLong(plan::remoteOffset));
        long[] local = new long[n];
        long[] remote = new long[n];
        long[] sizes = new long[n];
        int copies = 0;
        for (int k = 0; k < n; k++) {
            int b = order[k];
            if (copies > 0 && local[copies - 1] + sizes[copies - 1] == plan.localOffset(b)
                    && remote[copies - 1] + sizes[copies - 1] == plan.remoteOffset(b)) {
                sizes[copies - 1] += plan.size(b);
            } else {
                local[copies] = plan.localOffset(b);
                remote[copies] = plan.remoteOffset(b);
                sizes[copies] = plan.size(b);
                copies++;
            }
        }
        return new CopyPlan(Arrays.copyOf(local, copies), Arrays.copyOf(remote, copies), Arrays.copyOf(sizes, copies));
    }

    int copies() {
        return sizes.length;
    }

    /**
     * The scatter/gather kernel's metadata for these copies: {@code 3 * copies()} values, the source
     * offsets, then the destination offsets, then the sizes. A write copies local to remote; a read, remote
     * to local.
     */
    long[] metadata(boolean write) {
        int n = copies();
        long[] meta = new long[3 * n];
        System.arraycopy(write ? localOffsets : remoteOffsets, 0, meta, 0, n);
        System.arraycopy(write ? remoteOffsets : localOffsets, 0, meta, n, n);
        System.arraycopy(sizes, 0, meta, 2 * n, n);
        return meta;
    }

    /** The largest copy's size in bytes (0 for no copies). */
    long largest() {
        long max = 0;
        for (long size : sizes) {
            max = Math.max(max, size);
        }
        return max;
    }
}
