package dev.kvflux.transfer;

import dev.kvflux.bindings.TransferStatus;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What both sides do with the statuses a transfer posted once it has ended. */
final class Statuses {
    private static final Logger LOG = LoggerFactory.getLogger(Statuses.class);

    private Statuses() {
    }

    /** Whether any status may still be in flight; one that cannot be queried counts as in flight. */
    static boolean inFlight(List<? extends TransferStatus> posted) {
        for (TransferStatus status : posted) {
            try {
                if (!status.code().isTerminal()) {
                    return true;
                }
            } catch (RuntimeException broken) {
                return true;
            }
        }
        return false;
    }

    /** Releases what the engine keeps for each status (native handles): nothing queries them once drained. */
    static void close(List<? extends TransferStatus> posted) {
        for (TransferStatus status : posted) {
            if (status instanceof AutoCloseable closeable) {
                try {
                    closeable.close();
                } catch (Exception e) {
                    LOG.debug("releasing a status failed: {}", e.toString());
                }
            }
        }
    }
}
