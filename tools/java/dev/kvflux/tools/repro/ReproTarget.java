package dev.kvflux.tools.repro;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import java.util.Map;

/**
 * What a {@link ReproBackend} opened for one run: an engine, a session from the prefill buffer to the
 * decode buffer (each at least {@link ReproGeometry#regionBytes()} long), and optional hooks.
 *
 * <p>The run, for each strategy and each request {@code r}: for each layer {@code l} it waits for
 * {@link #layerEvent layerEvent(r, l)} and posts the layer's batch with {@code session().batchWrite};
 * then it times the strategy's wait over the request's statuses; then it calls {@link #afterWait
 * afterWait(r)} and keeps what it returns. Requests of one strategy run one after another, strategies
 * one after another, all on one target. {@link #close} is called once at the end, also after a failure.
 */
public interface ReproTarget extends AutoCloseable {

    /** The engine whose {@code waitAll} the native strategies call. */
    TransferEngine engine();

    /** The session every layer is posted on. */
    TransferSession session();

    /**
     * The event to wait for before posting layer {@code layer} of request {@code request} (counted from
     * 0 within a strategy); one not ready within the transfer timeout ends the run with an error. By
     * default an event that is ready at once.
     */
    default LayerEvent layerEvent(int request, int layer) {
        return () -> EventState.READY;
    }

    /**
     * Extra figures for one wait, taken right after it ended (for example the raw copy time, the
     * detection lag, a byte check). Keys are snake_case; numbers are aggregated per strategy (median,
     * min, max) into the report and the JSON, other values are listed. By default none.
     */
    default Map<String, Object> afterWait(int request) {
        return Map.of();
    }

    /** Releases the engine, buffers and any helper process. */
    @Override
    void close();
}
