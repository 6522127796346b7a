package dev.kvflux.serving.role;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.serving.metrics.RoleMetrics;

/**
 * A role's engine meters, for leak checks after faults: {@code kvflux.engine.peers.imported} (decode regions
 * imported and not yet forgotten), and where the engine counts them, {@code kvflux.engine.handles.open} (the native
 * library's open handles) and {@code kvflux.engine.peer.mappings.open} (other processes' memory mapped here: the
 * C simulator's shared host memory, a GPU copy engine's IPC mappings).
 */
final class EngineMeters {
    private EngineMeters() {
    }

    static void register(RoleMetrics meters, DescribedEngine engine) {
        meters.gauge("kvflux.engine.peers.imported", "Peer KV regions imported into this role's engine and not yet"
                + " forgotten", engine, DescribedEngine::peersImported);
        if (engine instanceof NativeTransferEngine n) {
            if (n.liveHandles().isPresent()) {
                meters.gauge("kvflux.engine.handles.open", "Handles open in the native MoRI library (engines, memory,"
                        + " sessions, statuses)", n, e -> e.liveHandles().orElse(0));
            }
            n.simulator().ifPresent(sim -> meters.gauge("kvflux.engine.peer.mappings.open", "Other processes' memory"
                    + " mapped into this one for sessions", sim, s -> s.openMappings()));
        } else if (engine instanceof GpuCopyEngine g) {
            meters.gauge("kvflux.engine.peer.mappings.open", "Peer GPU buffers mapped here through IPC", g,
                    GpuCopyEngine::openMappings);
        }
    }
}
