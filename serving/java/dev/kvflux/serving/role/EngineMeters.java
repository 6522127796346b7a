package dev.kvflux.serving.role;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.serving.metrics.RoleMetrics;
import java.util.List;

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
        register(meters, List.of(engine));
    }

    /** The meters of a role's engines, one per rank, each gauge their sum. */
    static void register(RoleMetrics meters, List<? extends DescribedEngine> engines) {
        meters.gauge("kvflux.engine.peers.imported", "Peer KV regions imported into this role's engines and not yet"
                + " forgotten", engines, es -> es.stream().mapToLong(DescribedEngine::peersImported).sum());
        List<NativeTransferEngine> natives = engines.stream().filter(NativeTransferEngine.class::isInstance)
                .map(NativeTransferEngine.class::cast).toList();
        if (!natives.isEmpty() && natives.size() == engines.size()) {
            if (natives.stream().allMatch(n -> n.liveHandles().isPresent())) {
                meters.gauge("kvflux.engine.handles.open", "Handles open in the native MoRI library (engines, memory,"
                        + " sessions, statuses)", natives, ns -> ns.stream()
                                .mapToLong(n -> n.liveHandles().orElse(0)).sum());
            }
            if (natives.stream().allMatch(n -> n.simulator().isPresent())) {
                meters.gauge("kvflux.engine.peer.mappings.open", "Other processes' memory mapped into this one for"
                        + " sessions", natives, ns -> ns.stream()
                                .mapToLong(n -> n.simulator().orElseThrow().openMappings()).sum());
            }
        }
        List<GpuCopyEngine> gpus = engines.stream().filter(GpuCopyEngine.class::isInstance)
                .map(GpuCopyEngine.class::cast).toList();
        if (!gpus.isEmpty() && gpus.size() == engines.size()) {
            meters.gauge("kvflux.engine.peer.mappings.open", "Peer GPU buffers mapped here through IPC", gpus,
                    gs -> gs.stream().mapToLong(GpuCopyEngine::openMappings).sum());
        }
    }
}
