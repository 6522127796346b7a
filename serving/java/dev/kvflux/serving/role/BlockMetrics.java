package dev.kvflux.serving.role;

import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.Incarnation;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * A role's KV block meters, read from its {@link BlockAllocator} at each scrape: {@code kvflux.blocks} (gauge,
 * tag {@code state}: free, allocated, writing, quarantined), {@code kvflux.blocks.capacity},
 * {@code kvflux.blocks.owners} (requests holding blocks), {@code kvflux.blocks.oldest.age} (in seconds, since
 * the oldest grant still held was made), and the counters {@code kvflux.blocks.lease.expired} (quarantines
 * ended by the lease, not by a release) and {@code kvflux.blocks.forced.frees}; and the role's start time.
 */
final class BlockMetrics {
    private BlockMetrics() {
    }

    /**
     * {@code kvflux.role.start.time}: when the role's incarnation started, in seconds since the epoch (a new
     * value is a restart; the incarnation itself needs more bits than a sample carries).
     */
    static void registerIncarnation(RoleMetrics meters, long incarnation) {
        meters.secondsGauge("kvflux.role.start.time", "When this incarnation of the role started, since the epoch",
                incarnation, i -> Incarnation.startMillis(i) / 1000.0);
    }

    /** The blocks of several ranks' sides, state by state, as one. */
    static BlockAllocator.Snapshot sum(java.util.List<BlockAllocator.Snapshot> ranks) {
        if (ranks.size() == 1) {
            return ranks.getFirst();
        }
        java.util.Map<BlockAllocator.State, Integer> blocks = new java.util.EnumMap<>(BlockAllocator.State.class);
        for (BlockAllocator.State state : BlockAllocator.State.values()) {
            blocks.put(state, 0);
        }
        long oldest = 0;
        long owners = 0;
        long expired = 0;
        long refused = 0;
        long forced = 0;
        for (BlockAllocator.Snapshot s : ranks) {
            s.blocks().forEach((state, n) -> blocks.merge(state, n, Integer::sum));
            oldest = Math.max(oldest, s.oldestAgeMillis());
            owners += s.owners();
            expired += s.leaseExpired();
            refused += s.refusedOutOfBlocks();
            forced += s.forcedFrees();
        }
        return new BlockAllocator.Snapshot(blocks, oldest, owners, expired, refused, forced);
    }

    /** The meters of a side's blocks: {@code snapshot} is read at each scrape, {@code capacity} is fixed. */
    static void register(RoleMetrics meters, Supplier<BlockAllocator.Snapshot> snapshot, int capacity) {
        for (BlockAllocator.State state : BlockAllocator.State.values()) {
            meters.gauge("kvflux.blocks", "KV blocks per state", snapshot,
                    b -> b.get().blocks().get(state), "state", state.name().toLowerCase(Locale.ROOT));
        }
        meters.gauge("kvflux.blocks.capacity", "KV blocks the role has", snapshot, b -> capacity);
        meters.gauge("kvflux.blocks.owners", "Requests holding KV blocks", snapshot, b -> b.get().owners());
        meters.secondsGauge("kvflux.blocks.oldest.age", "Time since the oldest grant still held was made", snapshot,
                b -> b.get().oldestAgeMillis() / 1000.0);
        meters.functionCounter("kvflux.blocks.lease.expired",
                "Quarantined blocks' owners freed by the lease because no release came", snapshot,
                b -> b.get().leaseExpired());
        meters.functionCounter("kvflux.blocks.forced.frees",
                "Owners whose blocks were freed while their copies might still be in flight", snapshot,
                b -> b.get().forcedFrees());
    }
}
