package dev.kvflux.pipeline.serve;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.pipeline.proxy.HttpJson;
import java.util.Locale;
import java.util.Map;

/** The {@code kv_blocks} object of a role's {@code /metrics}: blocks per state and the oldest grant's age. */
final class BlockMetrics {
    private BlockMetrics() {
    }

    /**
     * {@code {"capacity", "free", "allocated", "writing", "quarantined", "held", "owners", "oldest_age_ms",
     * "lease_expired", "refused_out_of_blocks", "forced_frees"}}; {@code held} is every block not free.
     */
    static ObjectNode json(BlockAllocator blocks) {
        BlockAllocator.Snapshot snap = blocks.snapshot();
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("capacity", blocks.capacity());
        for (Map.Entry<BlockAllocator.State, Integer> e : snap.blocks().entrySet()) {
            json.put(e.getKey().name().toLowerCase(Locale.ROOT), e.getValue());
        }
        return json.put("held", blocks.capacity() - snap.blocks().get(BlockAllocator.State.FREE))
                .put("owners", snap.owners()).put("oldest_age_ms", snap.oldestAgeMillis())
                .put("lease_expired", snap.leaseExpired()).put("refused_out_of_blocks", snap.refusedOutOfBlocks())
                .put("forced_frees", snap.forcedFrees());
    }
}
