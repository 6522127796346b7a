package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;

/** Turns a non-SUCCESS {@code waitAll} result into the wait's error, with the seed's messages. */
final class NativeResults {
    private NativeResults() {
    }

    static TransferException toException(StatusCode result, List<? extends TransferStatus> statuses,
                                         Duration transferTimeout) {
        if (result == StatusCode.IN_PROGRESS) {
            return TransferException.timedOut(transferTimeout);
        }
        for (TransferStatus status : statuses) {
            StatusCode code = status.code();
            if (code.isFailure()) {
                return TransferException.failed(code, status.message());
            }
        }
        return TransferException.failed(result, "wait_all returned " + result.qualifiedName()
                + " although no status failed (a status never posted?)");
    }
}
