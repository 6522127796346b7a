package dev.kvflux.operators;

import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.bindings.BatchPlan;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** A decode-side READ flow built from kvflux's operators and Reactor alone, without the pipeline layer. */
class CustomReadFlowTest {

    @Test
    void aCustomReadFlowComposesFromOperatorsAlone() {
        int layerCount = 6;
        long layerBytes = 1 << 20;
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder().scheduler(clock).build();
                    TransferSession session = engine.createSession(engine.registerMemory(layerCount * layerBytes, 1),
                            engine.registerMemory(layerCount * layerBytes, 0));
                    CompletionWait barrier = CompletionWait.drain(Duration.ofSeconds(30));

                    // For each layer: wait for its event, post its reads, then a drain barrier; emit the layer.
                    Function<Flux<Integer>, Flux<Integer>> readLayers = layers -> layers.concatMap(layer ->
                            Polls.layerReady(SimulatedLayerEvent.readyAfter(clock, Duration.ofMillis(5)))
                                    .then(Mono.fromCallable(() -> session.batchRead(
                                            BatchPlan.mirrored(new long[] {layer * layerBytes}, layerBytes),
                                            session.allocateTransferUid())))
                                    .flatMap(status -> barrier.await(List.of(status)))
                                    .thenReturn(layer));
                    return Flux.range(0, layerCount).transform(readLayers);
                })
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(1))
                .expectNext(0, 1, 2, 3, 4, 5)
                .verifyComplete();
    }
}
