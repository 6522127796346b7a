package dev.kvflux.examples.start;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.micrometer.MicrometerWaitRecorder;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.Polls;
import dev.kvflux.operators.TransferException;
import dev.kvflux.pipeline.ReadBarrier;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The flows of {@link Flows} in virtual time: the engine, its layer events and the waits all run on
 * {@code VirtualTimeScheduler.get()}, so 30 s timeouts take milliseconds and every figure is exact.
 */
@Timeout(30)
class FlowsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final Duration LAYER_TIME = Duration.ofMillis(5);

    private static KvSetup kv(Fault fault) {
        return KvSetup.simulated(VirtualTimeScheduler.get(), 4, 8, 4096, LAYER_TIME, fault);
    }

    @Test
    void aWriteEndsWithinOneSliceOfItsLastCopy() {
        AtomicReference<KvSetup> setup = new AtomicReference<>();
        List<TransferStatus> posted = new ArrayList<>();
        AtomicReference<Long> doneAt = new AtomicReference<>();
        StepVerifier.withVirtualTime(() -> {
                    KvSetup kv = kv(null);
                    setup.set(kv);
                    CompletionWait wait = CompletionWait.failFast(TIMEOUT);
                    // the same flow as Flows.write, keeping the statuses to ask the engine when their copies ended
                    return Flux.range(0, kv.layers())
                            .concatMap(layer -> Polls.layerReady(kv.events().get(layer))
                                    .then(Mono.fromCallable(() -> kv.session().batchWrite(kv.plans().get(layer),
                                            kv.session().allocateTransferUid()))))
                            .doOnNext(posted::add)
                            .as(wait::awaitAll)
                            .doOnSuccess(v -> doneAt.set(kv.engine().nowNanos()));
                })
                .thenAwait(Duration.ofSeconds(1))
                .expectComplete()
                .verify(Duration.ofSeconds(5));

        long lastCopy = posted.stream().mapToLong(s -> setup.get().engine().copyFinishedAt(s).orElseThrow()).max()
                .orElseThrow();
        assertThat(posted).hasSize(4);
        assertThat(doneAt.get() - lastCopy).as("ns from the last copy's end to the wait's end")
                .isBetween(0L, CompletionWait.failFast(TIMEOUT).spec().slice().toNanos());
    }

    @Test
    void aCopyThatNeverEndsTimesOutAtTheTransferTimeoutInVirtualTime() {
        StepVerifier.withVirtualTime(() -> Flows.write(kv(Fault.stall(1)), CompletionWait.failFast(TIMEOUT)))
                .expectSubscription()
                .expectNoEvent(TIMEOUT)
                .thenAwait(Duration.ofMillis(20))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).isTimeout()).isTrue())
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void failFastErrorsAtTheFailedCopyWhileDrainWaitsForTheOthers() {
        Fault second = Fault.fail(1, Duration.ofMillis(1), StatusCode.ERR_RDMA_OP, "link down");
        StepVerifier.withVirtualTime(() -> Flows.write(kv(second), CompletionWait.failFast(TIMEOUT)))
                .thenAwait(Duration.ofSeconds(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_RDMA_OP))
                .verify(Duration.ofSeconds(5));
        StepVerifier.withVirtualTime(() -> Flows.write(kv(second), CompletionWait.drain(TIMEOUT)))
                .thenAwait(Duration.ofSeconds(1))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_RDMA_OP))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aReadLayerIsEmittedOnlyOnceBothOfItsBatchesAreThrough() {
        StepVerifier.withVirtualTime(() -> Flows.read(kv(null), ReadBarrier.of(TIMEOUT)))
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(1))
                .expectNext(0, 1, 2, 3)
                .expectComplete()
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aFailedReadBatchFailsItsLayerAndNoLaterLayerIsEmitted() {
        // batches 0 and 1 are layer 0's halves, 2 and 3 layer 1's: the third batch fails
        Fault third = Fault.fail(2, Duration.ofMillis(1), StatusCode.ERR_RDMA_OP, "link down");
        StepVerifier.withVirtualTime(() -> Flows.read(kv(third), ReadBarrier.of(TIMEOUT)))
                .thenAwait(Duration.ofSeconds(1))
                .expectNext(0)
                .expectErrorSatisfies(e -> assertThat(e).hasMessageContaining("link down"))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void thePipelineEndsEachRequestInOneOutcomeAndCountsItsWaits() {
        // without StepVerifier: one virtual clock given to the engine, the pipeline and its wait, advanced by hand
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        WritePipeline pipeline = WritePipeline.builder()
                .waitStrategy(CompletionWait.failFast(TIMEOUT).scheduler(clock))
                .scheduler(clock)
                .recorder(MicrometerWaitRecorder.of(registry, Tags.of("role", "prefill")))
                .build();
        Fault first = Fault.fail(0, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "bad copy");
        List<WriteOutcome> outcomes = new ArrayList<>();
        try (KvSetup ok = KvSetup.simulated(clock, 4, 8, 4096, LAYER_TIME, null);
             KvSetup broken = KvSetup.simulated(clock, 4, 8, 4096, LAYER_TIME, first)) {
            Flux.merge(Flows.pipelined(pipeline, "ok", ok), Flows.pipelined(pipeline, "broken", broken))
                    .subscribe(outcomes::add);
            clock.advanceTimeBy(Duration.ofSeconds(1));
        }

        assertThat(outcomes).extracting(GettingStarted::describe)
                .containsExactlyInAnyOrder("ok write_done", "broken write_failed ERR_GPU_OP: bad copy");
        assertThat(registry.get("kvflux.wait.duration").tag("outcome", "done").timer().count()).isEqualTo(1);
        assertThat(registry.get("kvflux.wait.duration").tag("outcome", "failed").timer().count()).isEqualTo(1);
    }
}
