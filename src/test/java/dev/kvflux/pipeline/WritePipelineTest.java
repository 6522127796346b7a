package dev.kvflux.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.TransferException.Kind;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.pipeline.WriteOutcome.WriteDone;
import dev.kvflux.pipeline.WriteOutcome.WriteFailed;
import dev.kvflux.testing.SeedGeometry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.scheduler.VirtualTimeScheduler;

class WritePipelineTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final int LAYERS = 4;

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final Map<String, Long> outcomeAt = new ConcurrentHashMap<>();
    private final Map<String, WriteOutcome> outcomes = new ConcurrentHashMap<>();

    private TransferSession session(SimulatedXgmiEngine.Builder builder) {
        SimulatedXgmiEngine engine = builder.scheduler(clock).build();
        long bytes = SeedGeometry.SEED.regionBytes();
        return engine.createSession(engine.registerMemory(bytes, 0), engine.registerMemory(bytes, 1));
    }

    private WritePipeline.Builder pipeline() {
        return WritePipeline.builder().scheduler(clock)
                .waitStrategy(CompletionWait.failFast(TIMEOUT).scheduler(clock));
    }

    private static WriteRequest request(String id, TransferSession session, IntFunction<LayerEvent> events) {
        return new WriteRequest(id, session, Flux.range(0, LAYERS)
                .map(layer -> new LayerWrite(layer, events.apply(layer), SeedGeometry.SEED.plan(layer))));
    }

    private static WriteRequest request(String id, TransferSession session) {
        return request(id, session, layer -> SimulatedLayerEvent.ready());
    }

    private void record(WriteOutcome outcome) {
        assertThat(outcomes.putIfAbsent(outcome.transferId(), outcome)).as("second outcome for " + outcome).isNull();
        outcomeAt.put(outcome.transferId(), clock.now(TimeUnit.MILLISECONDS));
    }

    @Test
    void eachRequestGetsExactlyOneOutcome() {
        TransferSession session = session(SimulatedXgmiEngine.builder()
                .fault(Fault.stall(LAYERS))
                .fault(Fault.fail(2 * LAYERS + 1, Duration.ofMillis(3), StatusCode.ERR_RDMA_OP, "link down")));
        List<WriteRequest> requests = List.of(request("ok-0", session), request("stalled", session),
                request("failing", session), request("bad-event", session,
                        layer -> layer == 2 ? SimulatedLayerEvent.failsAfter(clock, Duration.ofMillis(1), "hipErrorLaunchFailure")
                                : SimulatedLayerEvent.ready()),
                request("ok-4", session));
        AtomicInteger completed = new AtomicInteger();

        pipeline().build().writeAll(Flux.fromIterable(requests)).subscribe(this::record, e -> { }, completed::incrementAndGet);
        clock.advanceTimeBy(TIMEOUT.plusSeconds(5));

        assertThat(completed).hasValue(1);
        assertThat(outcomes).hasSize(5);
        assertThat(outcomes.get("ok-0")).isEqualTo(new WriteDone("ok-0"));
        assertThat(outcomes.get("ok-4")).isEqualTo(new WriteDone("ok-4"));
        assertThat(outcomes.get("stalled")).isEqualTo(new WriteFailed("stalled", StatusCode.IN_PROGRESS,
                "RDMA transfer timed out after 30s", Kind.TIMED_OUT));
        assertThat(outcomes.get("failing")).isEqualTo(new WriteFailed("failing", StatusCode.ERR_RDMA_OP, "link down"));
        assertThat(((WriteFailed) outcomes.get("bad-event")).code()).isEqualTo(StatusCode.ERR_GPU_OP);
    }

    @Test
    void aLayerEventErrorBecomesWriteFailedWithErrGpuOp() {
        TransferSession session = session(SimulatedXgmiEngine.builder());

        pipeline().build().write(request("r", session, layer -> layer == 1
                        ? SimulatedLayerEvent.failsAfter(clock, Duration.ofMillis(2), "hipErrorIllegalAddress")
                        : SimulatedLayerEvent.ready()))
                .subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes.get("r")).isEqualTo(new WriteFailed("r", StatusCode.ERR_GPU_OP,
                "layer 1's event failed: hipErrorIllegalAddress"));
    }

    @Test
    void aTimedOutRequestDoesNotDelayAnothersSignal() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        WritePipeline pipeline = pipeline().build();

        pipeline.write(request("stalled", session)).subscribe(this::record);
        pipeline.write(request("quick", session)).subscribe(this::record);
        clock.advanceTimeBy(TIMEOUT.plusSeconds(1));

        assertThat(outcomes.get("quick")).isInstanceOf(WriteDone.class);
        assertThat(outcomeAt.get("quick")).isLessThan(100);
        assertThat(outcomes.get("stalled")).isInstanceOf(WriteFailed.class);
        assertThat(outcomeAt.get("stalled")).isEqualTo(TIMEOUT.toMillis());
    }

    @Test
    void aWriteFailedSaysWhetherItsWaitFailedTimedOutOrStalled() {
        TransferSession stalled = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        TransferSession stalledToo = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        TransferSession failing = session(SimulatedXgmiEngine.builder().fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_RDMA_OP, "QP error")));
        WritePipeline timingOut = pipeline().build();
        WritePipeline stalling = WritePipeline.builder().scheduler(clock)
                .waitStrategy(CompletionWait.failFast(TIMEOUT).stallAfter(Duration.ofSeconds(2)).scheduler(clock))
                .build();

        timingOut.write(request("timed-out", stalled)).subscribe(this::record);
        stalling.write(request("stalled", stalledToo)).subscribe(this::record);
        timingOut.write(request("failed", failing)).subscribe(this::record);
        clock.advanceTimeBy(TIMEOUT.plusSeconds(1));

        assertThat(((WriteFailed) outcomes.get("timed-out")).kind()).isEqualTo(Kind.TIMED_OUT);
        assertThat(((WriteFailed) outcomes.get("stalled")).kind()).isEqualTo(Kind.STALLED);
        assertThat(((WriteFailed) outcomes.get("failed")).kind()).isEqualTo(Kind.FAILED);
        assertThat(((WriteFailed) outcomes.get("failed")).code()).isEqualTo(StatusCode.ERR_RDMA_OP);
    }

    @Test
    void withMaxInFlightOneRequestsRunOneAfterAnotherAsVllmsWriteWorker() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        WritePipeline serial = pipeline().maxInFlight(1).build();

        serial.write(request("stalled", session)).subscribe(this::record);
        serial.write(request("queued", session)).subscribe(this::record);
        clock.advanceTimeBy(TIMEOUT.plusSeconds(1));

        assertThat(outcomes.get("queued")).isInstanceOf(WriteDone.class);
        assertThat(outcomeAt.get("queued")).isGreaterThanOrEqualTo(TIMEOUT.toMillis());
    }

    @Test
    void maxInFlightBoundsTheRequestsRunningAtOnce() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        AtomicInteger running = new AtomicInteger();
        AtomicInteger mostRunning = new AtomicInteger();
        // a request runs from its layer stream's subscription until its wait ends
        dev.kvflux.operators.WaitStrategy wait = CompletionWait.failFast(TIMEOUT).scheduler(clock);
        WritePipeline pipeline = pipeline().maxInFlight(2).waitStrategy(new dev.kvflux.operators.WaitStrategy() {
            @Override
            public String strategyName() {
                return wait.strategyName();
            }

            @Override
            public Mono<Void> await(List<? extends dev.kvflux.bindings.TransferStatus> statuses) {
                return wait.await(statuses).doOnTerminate(running::decrementAndGet);
            }
        }).build();
        List<WriteRequest> requests = Flux.range(0, 5).map(i -> {
            WriteRequest r = request("r" + i, session);
            return new WriteRequest(r.transferId(), session, r.layers()
                    .doOnSubscribe(s -> mostRunning.accumulateAndGet(running.incrementAndGet(), Math::max)));
        }).collectList().block();

        for (WriteRequest r : requests) {
            pipeline.write(r).subscribe(this::record);
        }
        assertThat(pipeline.requestsInFlight()).isEqualTo(2);
        assertThat(pipeline.requestsQueued()).isEqualTo(3);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes).hasSize(5).allSatisfy((id, o) -> assertThat(o).isInstanceOf(WriteDone.class));
        assertThat(mostRunning).hasValue(2);
        assertThat(pipeline.requestsInFlight()).isZero();
    }

    @Test
    void cancellingARunningRequestGivesItsPlaceToTheNext() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        WritePipeline serial = pipeline().maxInFlight(1).build();

        reactor.core.Disposable stalled = serial.write(request("stalled", session)).subscribe(this::record);
        serial.write(request("next", session)).subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));
        assertThat(outcomes).isEmpty();
        stalled.dispose();
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes).containsOnlyKeys("next");
        assertThat(outcomeAt.get("next")).isLessThan(2_100);
        assertThat(serial.requestsInFlight()).isZero();
    }

    @Test
    void theOutcomeComesWithinTheTransferTimeoutPlusOneSliceOfSealing() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.stall(1)));
        WriteRequest base = request("late-seal", session);
        Duration sealAt = Duration.ofSeconds(5);
        WriteRequest request = new WriteRequest("late-seal", session,
                base.layers().concatWith(Mono.delay(sealAt, clock).then(Mono.empty())));

        pipeline().build().write(request).subscribe(this::record);
        clock.advanceTimeBy(sealAt.plus(TIMEOUT).plusSeconds(5));

        assertThat(outcomes.get("late-seal")).isInstanceOf(WriteFailed.class);
        assertThat(outcomeAt.get("late-seal"))
                .isBetween(sealAt.plus(TIMEOUT).toMillis(), sealAt.plus(TIMEOUT).plusMillis(10).toMillis());
    }

    @Test
    void theOutcomeIsASealedTypeThatASwitchCoversWithoutADefault() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        Map<String, String> told = new ConcurrentHashMap<>();

        pipeline().build().write(request("r", session)).subscribe(outcome -> told.put("r", switch (outcome) {
            case WriteDone done -> "done " + done.transferId();
            case WriteFailed failed -> "failed " + failed.code();
        }));
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(told).containsEntry("r", "done r");
        assertThat(WriteOutcome.class.isSealed()).isTrue();
        assertThat(WriteOutcome.class.getPermittedSubclasses()).containsExactlyInAnyOrder(WriteDone.class,
                WriteFailed.class);
    }

    @Test
    void aLayerStreamThatNeitherEmitsNorCompletesFailsAtTheLayerTimeoutAndFreesItsPlace() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        WriteRequest base = request("never-sealed", session);
        WritePipeline serial = pipeline().maxInFlight(1).layerTimeout(Duration.ofSeconds(5)).build();

        serial.write(new WriteRequest("never-sealed", session, base.layers().concatWith(Flux.never())))
                .subscribe(this::record);
        serial.write(request("next", session)).subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(6));

        assertThat(outcomes.get("never-sealed")).isInstanceOfSatisfying(WriteFailed.class, f -> {
            assertThat(f.code()).isEqualTo(StatusCode.ERR_BAD_STATE);
            assertThat(f.reason()).contains("gave no layer and did not complete for 5s");
        });
        assertThat(outcomeAt.get("never-sealed")).isEqualTo(5_000);
        assertThat(outcomes.get("next")).isInstanceOf(WriteDone.class);
        assertThat(serial.requestsInFlight()).isZero();
    }

    @Test
    void slowEventsOnManyLayersDoNotCountAsASilentLayerStream() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        int layers = 64;
        WriteRequest slow = new WriteRequest("slow", session, Flux.range(0, layers).map(layer -> new LayerWrite(layer,
                SimulatedLayerEvent.readyAfter(clock, Duration.ofSeconds(layer + 1)), SeedGeometry.SEED.plan(layer))));

        pipeline().eventTimeout(Duration.ofSeconds(5)).layerTimeout(Duration.ofSeconds(5)).build().write(slow)
                .subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(layers + 1));

        assertThat(outcomes.get("slow")).isEqualTo(new WriteDone("slow"));
    }

    @Test
    void cancellingAQueuedRequestTakesItOutOfTheQueueWithoutRunningIt() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.stall(0)));
        WritePipeline serial = pipeline().maxInFlight(1).build();
        AtomicInteger cancelledStarts = new AtomicInteger();
        WriteRequest base = request("cancelled", session);
        WriteRequest cancelled = new WriteRequest("cancelled", session,
                base.layers().doOnSubscribe(s -> cancelledStarts.incrementAndGet()));

        serial.write(request("stalled", session)).subscribe(this::record);
        reactor.core.Disposable queued = serial.write(cancelled).subscribe(this::record);
        serial.write(request("next", session)).subscribe(this::record);
        assertThat(serial.requestsQueued()).isEqualTo(2);
        queued.dispose();
        assertThat(serial.requestsQueued()).isEqualTo(1);
        clock.advanceTimeBy(TIMEOUT.plusSeconds(1));

        assertThat(outcomes).containsOnlyKeys("stalled", "next");
        assertThat(cancelledStarts).hasValue(0);
        assertThat(serial.requestsInFlight()).isZero();
        assertThat(serial.requestsQueued()).isZero();
    }

    @Test
    void aBatchWriteThatReturnsNullIsWriteFailedWithErrBadStateNamingTheLayer() {
        TransferSession real = session(SimulatedXgmiEngine.builder());
        TransferSession nullOnLayerTwo = new TransferSession() {
            private int posts;

            @Override
            public long allocateTransferUid() {
                return real.allocateTransferUid();
            }

            @Override
            public dev.kvflux.bindings.TransferStatus batchWrite(dev.kvflux.bindings.BatchPlan plan, long uid) {
                return posts++ == 2 ? null : real.batchWrite(plan, uid);
            }

            @Override
            public dev.kvflux.bindings.TransferStatus batchRead(dev.kvflux.bindings.BatchPlan plan, long uid) {
                return real.batchRead(plan, uid);
            }

            @Override
            public dev.kvflux.bindings.MemoryRegion local() {
                return real.local();
            }

            @Override
            public dev.kvflux.bindings.MemoryRegion remote() {
                return real.remote();
            }
        };

        pipeline().build().write(request("nothing-posted", nullOnLayerTwo)).subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes.get("nothing-posted")).isInstanceOfSatisfying(WriteFailed.class, f -> {
            assertThat(f.code()).isEqualTo(StatusCode.ERR_BAD_STATE);
            assertThat(f.reason()).contains("layer 2").contains("returned no status (null)");
        });
    }

    /** A wait strategy that succeeds and records the subscriber's {@code transfer} Context entry. */
    private static dev.kvflux.operators.WaitStrategy contextReading(List<String> seen) {
        return new dev.kvflux.operators.WaitStrategy() {
            @Override
            public String strategyName() {
                return "context-reading";
            }

            @Override
            public Mono<Void> await(List<? extends dev.kvflux.bindings.TransferStatus> statuses) {
                return Mono.deferContextual(context -> {
                    seen.add(context.getOrDefault("transfer", "none"));
                    return Mono.empty();
                });
            }
        };
    }

    @Test
    void theSubscribersContextReachesTheWaitStrategyThroughThePipeline() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        List<String> seen = new CopyOnWriteArrayList<>();
        WritePipeline pipeline = WritePipeline.builder().scheduler(clock).waitStrategy(contextReading(seen)).build();

        pipeline.write(request("r", session)).contextWrite(reactor.util.context.Context.of("transfer", "t-1"))
                .subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes.get("r")).isEqualTo(new WriteDone("r"));
        assertThat(seen).containsExactly("t-1");
    }

    @Test
    void aQueuedRequestKeepsItsOwnSubscribersContext() {
        TransferSession session = session(SimulatedXgmiEngine.builder());
        List<String> seen = new CopyOnWriteArrayList<>();
        WritePipeline serial = WritePipeline.builder().scheduler(clock).maxInFlight(1)
                .waitStrategy(contextReading(seen)).build();
        // the first request's layers come only after a second, so the second request waits in the queue
        WriteRequest slow = new WriteRequest("first", session,
                request("first", session).layers().delaySubscription(Duration.ofSeconds(1), clock));

        serial.write(slow).contextWrite(reactor.util.context.Context.of("transfer", "first")).subscribe(this::record);
        serial.write(request("second", session)).contextWrite(reactor.util.context.Context.of("transfer", "second"))
                .subscribe(this::record);
        assertThat(serial.requestsQueued()).isEqualTo(1);
        clock.advanceTimeBy(Duration.ofSeconds(2));

        assertThat(outcomes).containsOnlyKeys("first", "second");
        assertThat(seen).containsExactly("first", "second");
        assertThat(serial.requestsInFlight()).isZero();
    }

    @Test
    void theRecorderSetOnTheBuilderHearsEveryRequestsWaitWithItsDetectionLag() {
        TransferSession session = session(SimulatedXgmiEngine.builder().fault(Fault.fail(LAYERS, Duration.ofMillis(3),
                StatusCode.ERR_RDMA_OP, "link down")));
        dev.kvflux.testing.RecordingWaitRecorder recorder = new dev.kvflux.testing.RecordingWaitRecorder();
        WritePipeline pipeline = pipeline().recorder(recorder).build();

        pipeline.write(request("ok", session)).subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));
        pipeline.write(request("failing", session)).subscribe(this::record);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(outcomes.get("ok")).isInstanceOf(WriteDone.class);
        assertThat(outcomes.get("failing")).isInstanceOf(WriteFailed.class);
        assertThat(recorder.ended).extracting(dev.kvflux.testing.RecordingWaitRecorder.Ended::outcome)
                .containsExactly(dev.kvflux.operators.WaitOutcome.DONE, dev.kvflux.operators.WaitOutcome.FAILED);
        assertThat(recorder.startedStatuses).containsExactly(LAYERS, LAYERS);
        assertThat(recorder.failures).containsExactly(StatusCode.ERR_RDMA_OP);
        assertThat(recorder.lags).singleElement().satisfies(lag -> assertThat(lag)
                .isBetween(Duration.ZERO, WaitSpec.DEFAULT_SLICE));
        assertThat(recorder.inFlight()).isZero();
    }

    @Test
    void aSecondSubscriptionWhileTheFirstRunsPostsNothingAndSaysSo() {
        SimulatedXgmiEngine.Builder builder = SimulatedXgmiEngine.builder();
        SimulatedXgmiEngine engine = builder.scheduler(clock).build();
        long bytes = SeedGeometry.SEED.regionBytes();
        TransferSession session = engine.createSession(engine.registerMemory(bytes, 0), engine.registerMemory(bytes, 1));
        Mono<WriteOutcome> write = pipeline().build().write(request("twice", session,
                layer -> SimulatedLayerEvent.readyAfter(clock, Duration.ofMillis(5))));
        List<WriteOutcome> seen = new CopyOnWriteArrayList<>();

        write.subscribe(seen::add);
        write.subscribe(seen::add);
        clock.advanceTimeBy(Duration.ofSeconds(1));

        assertThat(engine.batchesPosted()).as("batches posted for 4 layers").isEqualTo(LAYERS);
        assertThat(seen).hasSize(2).contains(new WriteDone("twice"));
        assertThat(seen).filteredOn(o -> o instanceof WriteFailed).singleElement()
                .satisfies(o -> assertThat(((WriteFailed) o).reason()).contains("already being written"));

        write.subscribe(seen::add);
        clock.advanceTimeBy(Duration.ofSeconds(1));
        assertThat(seen).as("once the first outcome is out the id may be written again").hasSize(3)
                .last().isEqualTo(new WriteDone("twice"));
        assertThat(engine.batchesPosted()).isEqualTo(2L * LAYERS);
    }
}
