package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;

/**
 * Turns a non-SUCCESS {@code waitAll} result into the wait's error, with the messages the other waits
 * use: {@code MoRIIO batch wait failed (StatusCode.X): reason}.
 */
final class NativeResults {
    private NativeResults() {
    }

    /**
     * {@code engine.waitAll(statuses, timeoutMs)} under the library contract: if it throws or returns null
     * because a status broke the contract, the ERR_BAD_STATE error for that status is thrown instead.
     */
    static StatusCode waitAll(TransferEngine engine, List<TransferStatus> statuses, long timeoutMs) {
        StatusCode result;
        try {
            result = engine.waitAll(statuses, timeoutMs);
        } catch (RuntimeException thrown) {
            throw StatusChecks.afterEngineThrew(statuses.toArray(new TransferStatus[0]), thrown);
        }
        if (result == null) {
            throw StatusChecks.afterEngineThrew(statuses.toArray(new TransferStatus[0]),
                    TransferException.badState("waitAll returned null", null));
        }
        return result;
    }

    static TransferException toException(StatusCode result, TransferStatus[] statuses, Duration transferTimeout) {
        if (result == StatusCode.IN_PROGRESS) {
            return TransferException.timedOut(transferTimeout);
        }
        for (int i = 0; i < statuses.length; i++) {
            StatusCode code;
            try {
                code = StatusChecks.code(statuses, i);
            } catch (TransferException broken) {
                return broken;
            }
            if (code.isFailure()) {
                return StatusChecks.failed(statuses[i], code);
            }
        }
        return TransferException.failed(result, "wait_all returned " + result.qualifiedName()
                + " although no status failed (a status never posted?)");
    }
}
