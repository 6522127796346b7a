package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.TransferException;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

/** READ mode's per-layer reads, in virtual time: each layer's step waits for its reads, and failures drain first. */
class LayerReadsTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final List<BatchPlan> THREE_LAYERS = List.of(plan(0), plan(1), plan(2));

    @Test
    void layerLsStepNeverStartsBeforeLayerLsReadsAreThrough() {
        long[] readsDoneAt = {30, 10, 50};
        List<long[]> stepStarts = new ArrayList<>();
        AtomicInteger drained = new AtomicInteger();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    TransferSession session = session(clock, l -> ScriptedStatus.succeedsAt(clock,
                            Duration.ofMillis(readsDoneAt[l])));
                    return LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet)
                            .doOnNext(l -> stepStarts.add(new long[] {l, clock.now(TimeUnit.MILLISECONDS)}));
                })
                .thenAwait(Duration.ofSeconds(1))
                .expectNext(0, 1, 2)
                .verifyComplete();
        assertThat(stepStarts).hasSize(3);
        for (long[] start : stepStarts) {
            assertThat(start[1]).as("layer %d's step", start[0]).isGreaterThanOrEqualTo(readsDoneAt[(int) start[0]]);
        }
        // layer 1's reads ended first, but its step comes after layer 0's
        assertThat(stepStarts.get(1)[1]).isGreaterThanOrEqualTo(stepStarts.get(0)[1]);
        assertThat(drained).hasValue(1);
    }

    @Test
    void aFailedReadFailsTheTransferOnlyOnceEveryReadInFlightHasDrained() {
        AtomicInteger drained = new AtomicInteger();
        long[] failedAt = {-1};
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    TransferSession session = session(clock, l -> l == 0
                            ? ScriptedStatus.failsAt(clock, Duration.ofMillis(20), StatusCode.ERR_RDMA_OP, "qp error")
                            : ScriptedStatus.succeedsAt(clock, Duration.ofMillis(400 + l)));
                    return LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet)
                            .doOnError(e -> failedAt[0] = clock.now(TimeUnit.MILLISECONDS));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(400))
                .thenAwait(Duration.ofSeconds(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferException.class)
                        .hasMessage("MoRIIO batch wait failed (StatusCode.ERR_RDMA_OP): layer 0 of 3: qp error"))
                .verify();
        assertThat(failedAt[0]).as("the error waits for layers 1 and 2's reads").isGreaterThanOrEqualTo(402);
        assertThat(drained).hasValue(1);
    }

    @Test
    void aReadStillInFlightAtTheTimeoutFailsAsInProgressAndKeepsTheBlocksHeld() {
        AtomicInteger drained = new AtomicInteger();
        AtomicInteger closed = new AtomicInteger();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    TransferSession session = session(clock, l -> closing(l == 1 ? ScriptedStatus.never(clock)
                            : ScriptedStatus.succeedsAt(clock, Duration.ofMillis(5)), closed));
                    return LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet);
                })
                .expectSubscription()
                .thenAwait(Duration.ofMillis(10))
                .expectNext(0)
                .expectNoEvent(Duration.ofSeconds(29))
                .thenAwait(Duration.ofSeconds(62))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.IN_PROGRESS))
                .verify();
        assertThat(drained).as("a read never ended: nothing may reuse its buffer").hasValue(0);
        assertThat(closed).as("but every status was closed, stalled or not").hasValue(3);
    }

    @Test
    void oneTransferTimeoutBoundsEveryLayersReadsFromWhenTheyArePostedNotEachLayerApart() {
        // each layer ends within 30 s of the one before, but the last 45 s after all were posted
        long[] doneAt = {20_000, 25_000, 45_000};
        AtomicInteger drained = new AtomicInteger();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    TransferSession session = session(clock, l -> ScriptedStatus.succeedsAt(clock,
                            Duration.ofMillis(doneAt[l])));
                    return LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet);
                })
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(26))
                .expectNext(0, 1)
                .thenAwait(Duration.ofSeconds(30))
                .expectErrorSatisfies(e -> assertThat(((TransferException) e).code()).isEqualTo(StatusCode.IN_PROGRESS))
                .verify();
        assertThat(drained).as("the late read ended in the drain: its blocks may be let go").hasValue(1);
    }

    @Test
    void cancellingDrainsTheReadsInFlightBeforeTheBlocksAreLetGo() {
        AtomicInteger drained = new AtomicInteger();
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        VirtualTimeScheduler.getOrSet(clock);
        try {
            TransferSession session = session(clock, l -> ScriptedStatus.succeedsAt(clock, Duration.ofMillis(100)));
            var subscription = LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet)
                    .subscribe();
            clock.advanceTimeBy(Duration.ofMillis(50));
            subscription.dispose();
            clock.advanceTimeBy(Duration.ofMillis(20));
            assertThat(drained).as("reads still in flight").hasValue(0);
            clock.advanceTimeBy(Duration.ofMillis(100));
            assertThat(drained).hasValue(1);
        } finally {
            VirtualTimeScheduler.reset();
        }
    }

    @Test
    void aPostThatThrowsFailsAfterTheLayersAlreadyPostedHaveDrained() {
        AtomicInteger drained = new AtomicInteger();
        StepVerifier.withVirtualTime(() -> {
                    VirtualTimeScheduler clock = VirtualTimeScheduler.get();
                    TransferSession session = session(clock, l -> {
                        if (l == 2) {
                            throw new IllegalStateException("engine closed");
                        }
                        return ScriptedStatus.succeedsAt(clock, Duration.ofMillis(200));
                    });
                    return Flux.from(LayerReads.of(TIMEOUT).read(session, THREE_LAYERS, 7, drained::incrementAndGet));
                })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(190))
                .thenAwait(Duration.ofMillis(100))
                .expectErrorSatisfies(e -> assertThat(e).hasMessageContaining("layer 2's reads could not be posted: engine"
                        + " closed"))
                .verify();
        assertThat(drained).hasValue(1);
    }

    /** {@code status}, counting its close in {@code closed}. */
    private static TransferStatus closing(TransferStatus status, AtomicInteger closed) {
        return new Closing(status, closed);
    }

    private record Closing(TransferStatus status, AtomicInteger closed) implements TransferStatus, AutoCloseable {
        @Override
        public StatusCode code() {
            return status.code();
        }

        @Override
        public String message() {
            return status.message();
        }

        @Override
        public void close() {
            closed.incrementAndGet();
        }
    }

    private static BatchPlan plan(int layer) {
        return BatchPlan.of(new long[] {layer * 64L}, new long[] {layer * 64L}, new long[] {64});
    }

    /** A session whose {@code n}-th batch_read returns {@code status.apply(n)}; writes are refused. */
    private static TransferSession session(VirtualTimeScheduler clock, Function<Integer, TransferStatus> status) {
        AtomicInteger reads = new AtomicInteger();
        return new TransferSession() {
            @Override
            public long allocateTransferUid() {
                return 7;
            }

            @Override
            public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
                throw new UnsupportedOperationException("READ mode never writes");
            }

            @Override
            public TransferStatus batchRead(BatchPlan plan, long transferUid) {
                return status.apply(reads.getAndIncrement());
            }

            @Override
            public MemoryRegion local() {
                return null;
            }

            @Override
            public MemoryRegion remote() {
                return null;
            }
        };
    }
}
