package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproStrategy;
import dev.kvflux.tools.repro.ReproTarget;
import java.io.PrintStream;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One {@link GpuBackend} run's prefill and decode pair, driven through the reproducer's SPI, one request at
 * a time from one thread. Each wait reports, besides the wait itself:
 * <ul>
 * <li>{@code raw_copy_ms}: GPU time from the first copy's start to the last copy's end (timing events);
 * <li>{@code layer_copy_median_ms}: one layer's copies, the median over the layers;
 * <li>{@code posting_ms}: from the request's first layer to its last post;
 * <li>{@code copy_end_after_wait_start_ms}: how long the copies still ran once the wait began;
 * <li>{@code detection_lag_ms}: the wait's end minus the last copy's end (GPU times placed on the host clock
 *     through an event recorded on an idle stream when the request starts);
 * <li>{@code wait_over_raw_copy}: the wait divided by the raw copy time;
 * <li>{@code event_queries_per_status}: native event queries the request's statuses made
 *     ({@link dev.kvflux.bindings.gpu.GpuCopyEngine#eventQueries()}), per status, and
 *     {@code wait_event_queries_per_status}: those made from the wait's start on;
 * <li>{@code verified_bytes}, {@code mismatched_bytes}, {@code bad_layers}: decode's check of every byte of
 *     its buffer after the request.
 * </ul>
 * Each request's figures are also printed on one line as it ends, and a watchdog ends the process with every
 * thread's stack (exit code 3) if no request ends for the transfer timeout plus a minute.
 */
final class GpuTarget implements ReproTarget, TransferSession {
    static final String EVENT_QUERIES_PER_STATUS = "event_queries_per_status";
    static final String WAIT_EVENT_QUERIES_PER_STATUS = "wait_event_queries_per_status";
    private static final LayerEvent ORDERED_ON_GPU = () -> EventState.READY;
    private final String backend;
    private final PrefillPair pair;
    private final ReproGeometry layout;
    private final Map<String, Object> setup;
    private final PrintStream log;
    private final Watchdog watchdog;
    private boolean push;
    private long request = -1;
    private int layer;
    private long postStart;
    private long lastPost;
    private long queriesAtStart;
    private long queriesAtWait;
    private long lastCopyEnd = TransferStatus.UNKNOWN_TIME;
    private boolean check = true;

    GpuTarget(String backend, PrefillPair pair, ReproGeometry layout, Duration transferTimeout,
            Map<String, Object> setup, PrintStream log) {
        this.backend = backend;
        this.pair = pair;
        this.layout = layout;
        this.setup = Collections.unmodifiableMap(new LinkedHashMap<>(setup));
        this.log = log;
        this.watchdog = Watchdog.start(transferTimeout.plusMinutes(1), log);
    }

    @Override
    public TransferEngine engine() {
        return pair.engine();
    }

    @Override
    public TransferSession session() {
        return this;
    }

    /** A copy path that does not work fails in the first seconds, on the polled path and the pushed one. */
    @Override
    public List<ReproStrategy> warmUp() {
        return List.of(ReproStrategy.REACTIVE, ReproStrategy.REACTIVE_PUSH);
    }

    /** Untimed requests are not checked byte by byte: decode's check takes longer than the request. */
    @Override
    public void warmingUp(boolean untimed) {
        check = !untimed;
    }

    /** Batches are posted with a pushing host function only for a strategy that waits for the push. */
    @Override
    public void startStrategy(ReproStrategy strategy) {
        push = strategy.push();
    }

    @Override
    public Map<String, Object> setup() {
        return setup;
    }

    @Override
    public LayerEvent layerEvent(int ignoredRequest, int layer) {
        if (layer == 0) {
            request++;
            pair.startRequest();
            queriesAtStart = pair.engine().eventQueries();
            postStart = System.nanoTime();
        }
        pair.fill(request, layer);
        this.layer = layer;
        return ORDERED_ON_GPU;
    }

    @Override
    public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
        if (plan.blocks() != layout.blocks() || plan.remoteOffset(0) != layout.offset(layer, 0)) {
            throw new IllegalArgumentException("the GPU target posts each layer right after its event;"
                    + " got a batch that is not layer " + layer + "'s");
        }
        TransferStatus status = pair.write(layer, transferUid, push);
        lastPost = System.nanoTime();
        if (layer == layout.layers() - 1) {
            queriesAtWait = pair.engine().eventQueries();
        }
        return status;
    }

    /**
     * Measures the request once its wait ended at {@code waitEnd}: every status is settled (or the wait gave up), so no
     * query follows. The lag runs to that end, not to this call, which comes after the run's own bookkeeping.
     */
    @Override
    public Map<String, Object> afterWait(int ignoredRequest, long waitEnd) {
        long queries = pair.engine().eventQueries();
        PrefillPair.Measurement m = pair.finish(request, lastPost, waitEnd, check);
        lastCopyEnd = m.lastCopyEndNanos();
        watchdog.progressed();
        double statuses = layout.layers();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("raw_copy_ms", m.rawCopyMs());
        figures.put("layer_copy_median_ms", m.layerCopyMs());
        figures.put("posting_ms", (lastPost - postStart) / 1e6);
        figures.put("copy_end_after_wait_start_ms", m.copyEndAfterWaitStartMs());
        figures.put(DETECTION_LAG_MS, m.lagMs());
        figures.put("wait_over_raw_copy", (waitEnd - lastPost) / 1e6 / m.rawCopyMs());
        figures.put(EVENT_QUERIES_PER_STATUS, (queries - queriesAtStart) / statuses);
        figures.put(WAIT_EVENT_QUERIES_PER_STATUS, (queries - queriesAtWait) / statuses);
        figures.put("verified_bytes", m.verifiedBytes());
        figures.put(MISMATCHED_BYTES, m.mismatchedBytes());
        figures.put("bad_layers", m.badLayers());
        log.printf(Locale.ROOT, "  %s request %d: raw copy %.3f ms, layer copy median %.4f ms, posting %.3f ms, copies"
                + " ended %.3f ms after the wait began, detection lag %.3f ms; %d of %d bytes mismatched; %.2f native"
                + " event queries per status (%.2f in the wait)%n", backend, request, m.rawCopyMs(), m.layerCopyMs(),
                figures.get("posting_ms"), m.copyEndAfterWaitStartMs(), m.lagMs(), m.mismatchedBytes(),
                m.verifiedBytes(), figures.get(EVENT_QUERIES_PER_STATUS), figures.get(WAIT_EVENT_QUERIES_PER_STATUS));
        return figures;
    }

    /** The last copy's end from its timing event, placed on the host clock as {@code detection_lag_ms} is. */
    @Override
    public long lastCopyEndNanos() {
        return lastCopyEnd;
    }

    @Override
    public long allocateTransferUid() {
        return pair.session().allocateTransferUid();
    }

    @Override
    public TransferStatus batchRead(BatchPlan plan, long transferUid) {
        return pair.session().batchRead(plan, transferUid);
    }

    @Override
    public MemoryRegion local() {
        return pair.session().local();
    }

    @Override
    public MemoryRegion remote() {
        return pair.session().remote();
    }

    @Override
    public void close() {
        watchdog.close();
        pair.close();
        log.println(backend + ": decode exited with code " + pair.decodeExitCode());
    }
}
