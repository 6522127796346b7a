package dev.kvflux.tools.repro;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import java.util.List;
import java.util.Map;

/**
 * What a {@link ReproBackend} opened for one run: an engine, a session from the prefill buffer to the
 * decode buffer (each at least {@link ReproGeometry#regionBytes()} long), and optional hooks.
 *
 * <p>The run first sends one request for each of the target's {@link #warmUp} strategies, then, for each
 * strategy, tells the target with {@link #startStrategy} and sends the strategy's requests. For each request
 * {@code r}: for each layer {@code l} it waits for {@link #layerEvent layerEvent(r, l)} and posts the layer's
 * batch with {@code session().batchWrite}; then it times the strategy's wait over the request's statuses;
 * then it calls {@link #afterWait(int, long) afterWait(r, end)} and keeps what it returns. Requests of one strategy
 * run one after another, strategies one after another, all on one target. {@link #close} is called once at the end,
 * also after a failure.
 */
public interface ReproTarget extends AutoCloseable {

    /**
     * The {@link #afterWait} figure of a target that checks decode's bytes: how many were wrong. A warm-up
     * request with any stops the run, and {@code kvflux repro} exits 1 when any wait had some.
     */
    String MISMATCHED_BYTES = "mismatched_bytes";

    /**
     * The {@link #afterWait} figure of a target that measures the detection lag itself (from GPU timing events): the
     * wait's end minus the last copy's end, in milliseconds. Without it the run takes the lag from the statuses'
     * {@link dev.kvflux.bindings.TransferStatus#completedAtNanos() copy-end times}, when every status knows its own.
     */
    String DETECTION_LAG_MS = "detection_lag_ms";

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

    /**
     * {@link #afterWait(int)} for a wait whose caller ran again at {@code waitEndedNanos} ({@link System#nanoTime}).
     * The run calls this one, after its own bookkeeping; a target that times the wait's end itself (as for
     * {@link #DETECTION_LAG_MS}) takes it from here rather than from its own clock, which would count that bookkeeping
     * as lag. By default {@link #afterWait(int)}.
     */
    default Map<String, Object> afterWait(int request, long waitEndedNanos) {
        return afterWait(request);
    }

    /**
     * Strategies to send one untimed request each with before the timed ones, in order (each announced
     * through {@link #startStrategy} first): a request that does not succeed whole, or reports
     * {@link #MISMATCHED_BYTES}, ends the run before anything is timed. By default none.
     */
    default List<ReproStrategy> warmUp() {
        return List.of();
    }

    /**
     * Told before the requests of {@code strategy} are posted, so that the target can post the way the
     * strategy needs (with a pushing host function for {@link ReproStrategy#push()}). By default nothing.
     */
    default void startStrategy(ReproStrategy strategy) {
    }

    /**
     * Told {@code true} before a plan's untimed requests ({@link ReproRun.Plan#warmUp()}) and {@code false} after them:
     * while warming up a target may skip what only checks a result (decode's byte check), so that a long warm-up costs
     * the posts and the waits alone. The target's own {@link #warmUp} requests are checked. By default nothing.
     */
    default void warmingUp(boolean untimed) {
    }

    /**
     * How long after a wait the statuses' copy-end times may still arrive (a backend that records them on a thread
     * of its own, as the shim over the real MoRI does): the run waits up to this long for every succeeded status to
     * know its own before it computes the wait's detection lag. By default none.
     */
    default java.time.Duration copyEndGrace() {
        return java.time.Duration.ZERO;
    }

    /**
     * When the last copy of the request whose wait just ended ended on the GPU, placed on {@link System#nanoTime()}'s
     * clock from timing events, or {@link dev.kvflux.bindings.TransferStatus#UNKNOWN_TIME} where the target does not
     * measure it (the default). Read right after {@link #afterWait}; it makes the first of the push stages
     * ({@code kvflux repro --json}'s {@code stages}).
     */
    default long lastCopyEndNanos() {
        return dev.kvflux.bindings.TransferStatus.UNKNOWN_TIME;
    }

    /**
     * How this target is set up, for the report: devices, copy path and the like, snake_case keys in the
     * order to print them. By default nothing.
     */
    default Map<String, Object> setup() {
        return Map.of();
    }

    /** Releases the engine, buffers and any helper process. */
    @Override
    void close();
}
