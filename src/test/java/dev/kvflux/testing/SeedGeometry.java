package dev.kvflux.testing;

import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.tools.repro.ReproGeometry;
import java.util.ArrayList;
import java.util.List;

/** Posts the seed's request (118 layers of 128 blocks × 32 KiB, one batch per layer) on a session. */
public final class SeedGeometry {
    public static final ReproGeometry SEED = ReproGeometry.VLLM_MORI_IO;

    private SeedGeometry() {
    }

    /** Posts every layer at once and returns the statuses in layer order. */
    public static List<TransferStatus> writeAll(TransferSession session) {
        List<TransferStatus> statuses = new ArrayList<>(SEED.layers());
        for (int layer = 0; layer < SEED.layers(); layer++) {
            statuses.add(session.batchWrite(SEED.plan(layer), session.allocateTransferUid()));
        }
        return statuses;
    }
}
