package dev.kvflux.examples.start;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.Polls;
import dev.kvflux.pipeline.LayerWrite;
import dev.kvflux.pipeline.ReadBarrier;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.pipeline.WriteRequest;
import java.util.Arrays;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The three flows of the README, over a {@link KvSetup}: WRITE by hand, READ with a barrier, the pipeline. */
public final class Flows {
    private Flows() {
    }

    /**
     * Prefill's WRITE side by hand: each layer is posted once its event is ready ({@link Polls#layerReady} gives
     * up after 30 s), then one wait over all the layers' statuses. Cold: each subscription posts every layer again,
     * so subscribe once (or {@code cache()} the result to share it).
     */
    public static Mono<Void> write(KvSetup kv, CompletionWait wait) {
        TransferSession session = kv.session();
        return Flux.range(0, kv.layers())
                .concatMap(layer -> Polls.layerReady(kv.events().get(layer))
                        .then(Mono.fromCallable(() -> session.batchWrite(kv.plans().get(layer),
                                session.allocateTransferUid()))))
                .as(wait::awaitAll);
    }

    /**
     * Decode's READ side: per layer, once its event is ready, its blocks are read as two batches (two statuses), and
     * the layer is emitted once the {@link ReadBarrier} has drained both: if one fails, the error comes only after the
     * other has stopped writing into the layer's buffers.
     */
    public static Flux<Integer> read(KvSetup kv, ReadBarrier barrier) {
        TransferSession session = kv.session();
        return Flux.range(0, kv.layers()).concatMap(layer -> Polls.layerReady(kv.events().get(layer))
                .then(Mono.fromCallable(() -> halves(kv.plans().get(layer)).stream()
                        .map(half -> session.batchRead(half, session.allocateTransferUid()))
                        .toList()))
                .flatMap(barrier::await)
                .thenReturn(layer));
    }

    /**
     * The ready-made WRITE pipeline: many requests at once, each ending in one {@link WriteOutcome} and never in an
     * error. The request's layers are a {@code Flux<LayerWrite>}; its completion seals the request.
     */
    public static Mono<WriteOutcome> pipelined(WritePipeline pipeline, String transferId, KvSetup kv) {
        Flux<LayerWrite> layers = Flux.range(0, kv.layers())
                .map(layer -> new LayerWrite(layer, kv.events().get(layer), kv.plans().get(layer)));
        return pipeline.write(new WriteRequest(transferId, kv.session(), layers));
    }

    /** A plan's blocks as two plans, the first half and the rest. */
    static List<BatchPlan> halves(BatchPlan plan) {
        int half = plan.blocks() / 2;
        long[] local = plan.localOffsets();
        long[] remote = plan.remoteOffsets();
        long[] sizes = plan.sizes();
        return List.of(
                BatchPlan.of(Arrays.copyOfRange(local, 0, half), Arrays.copyOfRange(remote, 0, half),
                        Arrays.copyOfRange(sizes, 0, half)),
                BatchPlan.of(Arrays.copyOfRange(local, half, local.length), Arrays.copyOfRange(remote, half,
                        remote.length), Arrays.copyOfRange(sizes, half, sizes.length)));
    }
}
