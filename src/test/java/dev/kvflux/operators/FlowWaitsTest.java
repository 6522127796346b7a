package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.SubmissionPublisher;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The waits through JDK publishers and futures only, as code without Reactor uses them. */
class FlowWaitsTest {
    private static final long BLOCK = 4096;

    private static TransferSession session(SimulatedXgmiEngine engine) {
        return engine.createSession(engine.registerMemory(16 * BLOCK, 0), engine.registerMemory(16 * BLOCK, 1));
    }

    private static List<TransferStatus> post(TransferSession session, int batches) {
        return IntStream.range(0, batches).mapToObj(i -> session.batchWrite(
                BatchPlan.mirrored(new long[] {i * BLOCK}, BLOCK), session.allocateTransferUid())).toList();
    }

    /** Subscribes to {@code publisher} with a plain JDK subscriber; the future ends as the publisher does. */
    private static CompletableFuture<Void> ending(Flow.Publisher<Void> publisher) {
        CompletableFuture<Void> end = new CompletableFuture<>();
        publisher.subscribe(new Flow.Subscriber<>() {
            @Override
            public void onSubscribe(Flow.Subscription subscription) {
                subscription.request(Long.MAX_VALUE);
            }

            @Override
            public void onNext(Void item) {
            }

            @Override
            public void onError(Throwable error) {
                end.completeExceptionally(error);
            }

            @Override
            public void onComplete() {
                end.complete(null);
            }
        });
        return end;
    }

    @Test
    void awaitAllOverAJdkPublisherCompletesOnceItsStatusesSucceeded() throws Exception {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             SubmissionPublisher<TransferStatus> statuses = new SubmissionPublisher<>()) {
            CompletableFuture<Void> done = ending(FlowWaits.awaitAll(CompletionWait.failFast(Duration.ofSeconds(30)),
                    statuses));
            post(session(engine), 4).forEach(statuses::submit);
            statuses.close();

            done.get(10, TimeUnit.SECONDS);
            assertThat(done).isCompleted();
        }
    }

    @Test
    void aFailedStatusEndsTheFutureWithTheWaitsTransferException() throws Exception {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(1, Duration.ZERO, StatusCode.ERR_RDMA_OP, "link down")).build()) {
            CompletableFuture<Void> done = FlowWaits.await(CompletionWait.failFast(Duration.ofSeconds(30)),
                    post(session(engine), 3));

            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> done.get(10, TimeUnit.SECONDS));
            assertThat(failed.getCause()).isInstanceOf(TransferException.class);
            assertThat(((TransferException) failed.getCause()).code()).isEqualTo(StatusCode.ERR_RDMA_OP);
        }
    }

    @Test
    void aLayerEventAsAJdkPublisherCompletesWhenReady() throws Exception {
        ending(FlowWaits.layerReady(SimulatedLayerEvent.ready())).get(10, TimeUnit.SECONDS);
    }
}
