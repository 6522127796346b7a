package dev.kvflux.examples.start;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.Polls;
import dev.kvflux.pipeline.LayerWrite;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.pipeline.WriteRequest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The README's snippets exactly as it shows them, with the names they take as given ({@code session},
 * {@code events}, {@code plans}, {@code layers}, {@code transferId}, {@code layerWrites}) bound to a {@link KvSetup}.
 * {@code SnippetsTest} checks that every snippet the README and docs/embedding.md mark as taken from this module
 * still stands here line for line, and runs these.
 */
public final class ReadmeSnippets {
    private final TransferSession session;
    private final List<LayerEvent> events;
    private final List<BatchPlan> plans;
    private final int layers;
    private final String transferId;
    private final Flux<LayerWrite> layerWrites;
    /** The layers {@link #read} handed to attention, in order. */
    final List<Integer> attended = new CopyOnWriteArrayList<>();
    /** What {@link #pipelined} told decode. */
    final List<WriteOutcome> told = new CopyOnWriteArrayList<>();

    public ReadmeSnippets(KvSetup kv, String transferId) {
        this.session = kv.session();
        this.events = kv.events();
        this.plans = kv.plans();
        this.layers = kv.layers();
        this.transferId = transferId;
        this.layerWrites = Flux.range(0, layers).map(layer -> new LayerWrite(layer, events.get(layer), plans.get(layer)));
    }

    /** The README's WRITE flow. */
    public Mono<Void> write() {
        CompletionWait wait = CompletionWait.failFast(Duration.ofSeconds(30));   // 10 ms slice, Schedulers.parallel()

        Mono<Void> written = Flux.range(0, layers)
                .concatMap(layer -> Polls.layerReady(events.get(layer))
                        .then(Mono.fromCallable(() -> session.batchWrite(plans.get(layer), session.allocateTransferUid()))))
                .as(wait::awaitAll);   // completes within one slice of the last copy, or errors with a TransferException
        return written;
    }

    /** The README's custom READ flow: each layer goes to {@link #runAttention} once its read is through. */
    public void read() {
        CompletionWait barrier = CompletionWait.drain(Duration.ofSeconds(30));

        Function<Flux<Integer>, Flux<Integer>> readLayers = layerIndexes -> layerIndexes.concatMap(layer ->
                Polls.layerReady(events.get(layer))
                        .then(Mono.fromCallable(() -> session.batchRead(plans.get(layer), session.allocateTransferUid())))
                        .flatMap(status -> barrier.await(List.of(status)))
                        .thenReturn(layer));

        Flux.range(0, layers).transform(readLayers).subscribe(this::runAttention);
    }

    /** The README's pipeline: one request, its outcome to {@link #notifyDecode}. */
    public void pipelined() {
        WritePipeline pipeline = WritePipeline.builder()
                .waitStrategy(CompletionWait.failFast(Duration.ofSeconds(30)))
                .maxInFlight(64)
                .build();
        pipeline.write(new WriteRequest(transferId, session, layerWrites))   // Flux<LayerWrite>; its completion seals the request
                .subscribe(outcome -> notifyDecode(outcome));
    }

    private void runAttention(Integer layer) {
        attended.add(layer);
    }

    private void notifyDecode(WriteOutcome outcome) {
        told.add(outcome);
    }
}
