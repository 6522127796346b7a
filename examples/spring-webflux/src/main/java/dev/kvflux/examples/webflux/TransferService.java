package dev.kvflux.examples.webflux;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.examples.webflux.TransferContext.WaitReport;
import dev.kvflux.pipeline.LayerWrite;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.pipeline.WriteRequest;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.UUID;
import org.springframework.stereotype.Service;
import reactor.core.observability.micrometer.Micrometer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.context.Context;

/**
 * Runs one transfer: a simulated engine with the request's fault, a session between two of its regions,
 * one layer write per layer (one batch of the layer's blocks), all through the shared
 * {@link WritePipeline}. The transfer id and a {@link WaitReport} ride in the Reactor Context; the whole
 * write is measured as {@code kvflux.transfer}, and each outcome counted in
 * {@code kvflux.transfer.outcomes} by outcome, code and kind.
 */
@Service
public class TransferService {
    /** The block size the simulated engine's timing is calibrated on. */
    static final long BLOCK_BYTES = 32 * 1024;

    private final WritePipeline pipeline;
    private final SimulatedEngines engines;
    private final MeterRegistry registry;

    public TransferService(WritePipeline pipeline, SimulatedEngines engines, MeterRegistry registry) {
        this.pipeline = pipeline;
        this.engines = engines;
        this.registry = registry;
    }

    /**
     * The transfer's one result, once the pipeline has given its outcome; never an error. The engine is
     * closed when the outcome is out or the caller cancels.
     */
    public Mono<TransferResult> run(TransferRequest request) {
        String id = request.transferId() != null ? request.transferId() : UUID.randomUUID().toString();
        WaitReport report = new WaitReport();
        return Mono.using(() -> engines.create(request.fault()),
                        engine -> pipeline.write(writeRequest(id, engine, request)),
                        SimulatedXgmiEngine::close)
                .name("kvflux.transfer")
                .tap(Micrometer.metrics(registry))
                .map(outcome -> TransferResult.of(outcome, report))
                .doOnNext(this::count)
                .contextWrite(Context.of(TransferContext.TRANSFER_ID, id, WaitReport.class, report));
    }

    private static WriteRequest writeRequest(String id, SimulatedXgmiEngine engine, TransferRequest request) {
        long layerBytes = request.blocksPerLayer() * BLOCK_BYTES;
        MemoryRegion prefill = engine.registerMemory(request.layers() * layerBytes, 0);
        MemoryRegion decode = engine.registerMemory(request.layers() * layerBytes, 1);
        TransferSession session = engine.createSession(prefill, decode);
        Flux<LayerWrite> layers = Flux.range(0, request.layers()).map(layer ->
                new LayerWrite(layer, SimulatedLayerEvent.ready(), plan(layer * layerBytes, request.blocksPerLayer())));
        return new WriteRequest(id, session, layers);
    }

    /** The layer's blocks, one after another from {@code offset}, at the same offsets on both sides. */
    private static BatchPlan plan(long offset, int blocks) {
        long[] offsets = new long[blocks];
        for (int block = 0; block < blocks; block++) {
            offsets[block] = offset + block * BLOCK_BYTES;
        }
        return BatchPlan.mirrored(offsets, BLOCK_BYTES);
    }

    private void count(TransferResult result) {
        Counter.builder("kvflux.transfer.outcomes")
                .description("Transfers by outcome, status code and failure kind")
                .tag("outcome", result.outcome())
                .tag("code", result.code() != null ? result.code().name() : "SUCCESS")
                .tag("kind", result.kind() != null ? result.kind().name() : "NONE")
                .register(registry)
                .increment();
    }
}
