package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The prefill side's own rules, with a real decode side over loopback on the simulated engine. */
class PrefillSideTest {
    private static final int LAYERS = 3;
    private static final Duration WAIT = Duration.ofSeconds(5);

    private final SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
    private final List<PrefillRecorder.Event> events = new CopyOnWriteArrayList<>();
    private final List<TransferHistory.Event> history = new CopyOnWriteArrayList<>();
    /** Completed when the first history event of each kind is recorded. */
    private final java.util.Map<TransferHistory.Kind, java.util.concurrent.CompletableFuture<Void>> firstOfKind =
            new java.util.concurrent.ConcurrentHashMap<>();
    /** Called with each history event as it is recorded, on the thread that records it. */
    private volatile java.util.function.Consumer<TransferHistory.Event> onHistory = e -> { };
    private final DecodeSide decode = DecodeSide.builder().receiveDeadline(Duration.ofSeconds(3)).bindNow();
    private PrefillSide prefill = prefill(Duration.ofSeconds(3));

    private PrefillSide prefill(Duration decodeDeadline) {
        KvLayout layout = KvLayout.rows(LAYERS, 1024, 64);
        MemoryRegion local = engine.registerMemory(layout.regionBytes(), 0);
        MemoryRegion remote = new MemoryRegion("decode", 0, layout.regionBytes(), 1);
        return PrefillSide.builder().layout(layout).sessions(DecodeSessions.of(engine.createSession(local, remote)))
                .pipeline(WritePipeline.builder().waitStrategy(CompletionWait.failFast(Duration.ofSeconds(2))).build())
                .blocks(1024).transferTimeout(Duration.ofSeconds(2)).decodeDeadline(decodeDeadline).history(e -> {
                    history.add(e);
                    firstOfKind(e.kind()).complete(null);
                    onHistory.accept(e);
                })
                .recorder(new PrefillRecorder() {
                    @Override
                    public void record(Event event, String transferId) {
                        events.add(event);
                    }
                }).bindNow();
    }

    @AfterEach
    void close() {
        prefill.close(Duration.ZERO);
        decode.close();
        engine.close();
    }

    private static List<LayerEvent> ready(int layers) {
        return Collections.nCopies(layers, SimulatedLayerEvent.readyAfter(Schedulers.parallel(), Duration.ZERO));
    }

    private InetSocketAddress decodeAt() {
        return decode.notifyAddress();
    }

    @Test
    void aTransferIsWrittenOnceAndItsOutcomeIsTheOneDecodeIsTold() {
        DecodeTransfer receiving = decode.open("t-1", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var kv = receiving.kv().toFuture();
        PrefillTransfer sending = prefill.open("t-1", decodeAt(), 4, PrefillTransfer.Observer.NONE);

        assertThat(sending.write(ready(LAYERS)).block(WAIT)).isEqualTo(new WriteOutcome.WriteDone("t-1"));
        assertThat(kv).succeedsWithin(WAIT);
        assertThatThrownBy(() -> sending.write(ready(LAYERS))).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("write it once");
        receiving.close();
    }

    @Test
    void aWriteThatSucceedsTellsItsObserverWhatItsCopiesMovedAndWhenTheLastEndedBeforeItsOutcome() {
        DecodeTransfer receiving = decode.open("t-copied", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var kv = receiving.kv().toFuture();
        List<String> calls = new CopyOnWriteArrayList<>();
        List<Object[]> copied = new CopyOnWriteArrayList<>();
        PrefillTransfer sending = prefill.open("t-copied", decodeAt(), 4, new PrefillTransfer.Observer() {
            @Override
            public void copied(long bytes, Duration firstPostToLastEnd, Duration sinceLastEnd) {
                calls.add("copied");
                copied.add(new Object[] {bytes, firstPostToLastEnd, sinceLastEnd});
            }

            @Override
            public void written(WriteOutcome outcome) {
                calls.add("written");
            }
        });

        assertThat(sending.write(ready(LAYERS)).block(WAIT)).isEqualTo(new WriteOutcome.WriteDone("t-copied"));
        assertThat(calls).containsExactly("copied", "written");
        // 3 layers of 4 blocks of 64 bytes; the simulated link takes 12.5 us a block, so the span is at least 150 us
        assertThat((long) copied.getFirst()[0]).isEqualTo(LAYERS * 4 * 64);
        assertThat((Duration) copied.getFirst()[1]).isGreaterThanOrEqualTo(Duration.ofNanos(150_000));
        assertThat((Duration) copied.getFirst()[2]).isGreaterThanOrEqualTo(Duration.ZERO);
        assertThat(kv).succeedsWithin(WAIT);
        receiving.close();
    }

    @Test
    void aWriteStartedBeforeDecodesBlockListTellsItsObserverWhenTheListCameAndPostsOnlyAfterIt() {
        List<String> calls = new CopyOnWriteArrayList<>();
        PrefillTransfer sending = prefill.open("t-late-list", decodeAt(), 4, new PrefillTransfer.Observer() {
            @Override
            public void writing() {
                calls.add("writing");
            }

            @Override
            public void blockListReceived() {
                calls.add("block list");
            }

            @Override
            public void posted() {
                calls.add("posted");
            }

            @Override
            public void written(WriteOutcome outcome) {
                calls.add("written");
            }
        });
        var outcome = sending.write(ready(LAYERS)).toFuture();
        // decode has not opened the transfer, so no block list can have come: every layer is ready and none posted
        assertThat(calls).containsExactly("writing");
        assertThat(sending.posted()).isEmpty();

        DecodeTransfer receiving = decode.open("t-late-list", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var kv = receiving.kv().toFuture(); // decode sends its block list once its KV is awaited
        assertThat(outcome).succeedsWithin(WAIT).isEqualTo(new WriteOutcome.WriteDone("t-late-list"));
        assertThat(calls).containsExactly("writing", "block list", "posted", "written");
        assertThat(kv).succeedsWithin(WAIT);
        receiving.close();
    }

    @Test
    void aTransferAbortedBeforeItsFirstPostPostsNothingAndItsHistoryNamesNoPost() throws Exception {
        DecodeTransfer receiving = decode.open("t-cut", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var kv = receiving.kv().toFuture(); // decode sends its block list once its KV is awaited
        PrefillTransfer sending = prefill.open("t-cut", decodeAt(), 4, PrefillTransfer.Observer.NONE);
        // decode's block list is here and the write has started, waiting for its first layer's event
        awaitEvent(TransferHistory.Kind.RECEIVED);
        // the layer turns ready only when the test moves its clock: after the abort
        VirtualTimeScheduler layerClock = VirtualTimeScheduler.create();
        LayerEvent layer = SimulatedLayerEvent.readyAfter(layerClock, Duration.ofMillis(300));
        var outcome = sending.write(Collections.nCopies(LAYERS, layer)).toFuture();

        assertThat(sending.abort("cancelled before its first post")).isTrue();
        awaitEvent(TransferHistory.Kind.WRITES_ENDED);
        outcome.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        layerClock.advanceTimeBy(Duration.ofMillis(300));
        assertThat(layer.query()).isEqualTo(EventState.READY);
        Thread.sleep(50); // a write still polling the events would post within its 1 ms poll

        assertThat(sending.posted()).as("statuses posted").isEmpty();
        // a write_posted would tell the history checker that a copy could land in decode's blocks after release
        assertThat(history).filteredOn(e -> e.transferId().equals("t-cut")).extracting(TransferHistory.Event::kind)
                .contains(TransferHistory.Kind.ABORTED, TransferHistory.Kind.WRITES_ENDED)
                .doesNotContain(TransferHistory.Kind.WRITE_POSTED);
        receiving.close();
    }

    @Test
    void aTransferAbortedWhileItIsBeingOpenedFreesTheBlocksItsOpeningTakes() {
        // the abort lands after the transfer is known by its id and before its blocks are taken, as a cancelled
        // request's or decode's abort can on a busy host
        onHistory = e -> {
            if (e.kind() == TransferHistory.Kind.OPENED && e.transferId().equals("t-raced")) {
                prefill.transfer("t-raced").abort("cancelled while it was being opened");
            }
        };
        PrefillTransfer t = prefill.open("t-raced", decodeAt(), 4, PrefillTransfer.Observer.NONE);

        assertThat(t.aborted().block(WAIT)).isEqualTo("cancelled while it was being opened");
        waitFor("every block free", () -> prefill.blocks().free() == prefill.blockCapacity());
        assertThat(prefill.blocks().free()).as("free blocks").isEqualTo(prefill.blockCapacity());
        assertThat(prefill.running()).isZero();
        assertThat(t.localBlocks()).as("the blocks it names").isEmpty();
        assertThat(t.whileHeld(() -> { })).as("used after the abort").isFalse();
    }

    @Test
    void aTransfersBlocksAreUsedOnlyWhileItHoldsThem() {
        PrefillTransfer t = prefill.open("t-held", decodeAt(), 4, PrefillTransfer.Observer.NONE);
        List<String> uses = new CopyOnWriteArrayList<>();

        assertThat(t.whileHeld(() -> uses.add("before"))).isTrue();
        t.abort("cancelled");
        assertThat(t.whileHeld(() -> uses.add("after"))).isFalse();

        assertThat(uses).containsExactly("before");
    }

    @Test
    void aWrittenTransfersHistoryNamesItsPostBeforeItsWritesEnded() throws Exception {
        DecodeTransfer receiving = decode.open("t-kept", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var kv = receiving.kv().toFuture(); // decode sends its block list once its KV is awaited
        PrefillTransfer sending = prefill.open("t-kept", decodeAt(), 4, PrefillTransfer.Observer.NONE);

        assertThat(sending.write(ready(LAYERS)).block(WAIT)).isEqualTo(new WriteOutcome.WriteDone("t-kept"));
        assertThat(kv).succeedsWithin(WAIT);
        awaitEvent(TransferHistory.Kind.WRITES_ENDED);

        List<TransferHistory.Event> own = history.stream().filter(e -> e.transferId().equals("t-kept")).toList();
        List<TransferHistory.Kind> kinds = own.stream().map(TransferHistory.Event::kind).toList();
        assertThat(kinds).containsOnlyOnce(TransferHistory.Kind.WRITE_POSTED);
        assertThat(kinds.indexOf(TransferHistory.Kind.WRITE_POSTED))
                .isLessThan(kinds.indexOf(TransferHistory.Kind.WRITES_ENDED));
        assertThat(own.get(kinds.indexOf(TransferHistory.Kind.WRITE_POSTED)).blocks()).hasSize(4);
        receiving.close();
    }

    private java.util.concurrent.CompletableFuture<Void> firstOfKind(TransferHistory.Kind kind) {
        return firstOfKind.computeIfAbsent(kind, k -> new java.util.concurrent.CompletableFuture<>());
    }

    /** Waits for the history's first event of {@code kind}: told by the recording itself, not polled. */
    private void awaitEvent(TransferHistory.Kind kind) {
        assertThat(firstOfKind(kind)).as("a " + kind + " event").succeedsWithin(EVENT_BOUND);
    }

    /**
     * A bound on an event to come, generous so that a loaded host cannot fail it: no test here claims a time.
     */
    private static final Duration EVENT_BOUND = Duration.ofSeconds(30);

    /**
     * Waits until {@code done}: a state with no event to listen to. {@link #EVENT_BOUND} only stops a test that would
     * otherwise hang, and fails it saying so.
     */
    private static void waitFor(String what, java.util.function.BooleanSupplier done) {
        long until = System.nanoTime() + EVENT_BOUND.toNanos();
        while (!done.getAsBoolean()) {
            assertThat(System.nanoTime()).as(what + ", not reached within " + EVENT_BOUND).isLessThan(until);
            LockSupport.parkNanos(2_000_000); // not a spin: the code under test needs the cores
        }
    }

    @Test
    void aWriteNeedsOneEventPerLayer() {
        PrefillTransfer sending = prefill.open("t-2", decodeAt(), 4, PrefillTransfer.Observer.NONE);
        assertThatThrownBy(() -> sending.write(ready(LAYERS - 1))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("one event per layer");
        sending.close();
    }

    @Test
    void aWriteAfterTheTransfersDeadlinePostsNothingAndAbortsIt() {
        prefill.close(Duration.ZERO);
        prefill = prefill(Duration.ofNanos(1));   // passed by the time write is called
        PrefillTransfer sending = prefill.open("late", decodeAt(), 4, PrefillTransfer.Observer.NONE);

        assertThat(sending.write(ready(LAYERS)).blockOptional(WAIT)).as("no outcome: decode has given up").isEmpty();
        // the deadline's own timer may abort it before the write is called (a loaded host): either way it is aborted
        // for its deadline and nothing is posted
        assertThat(sending.aborted().block(WAIT)).contains("the transfer's deadline");
        assertThat(events).contains(PrefillRecorder.Event.PAST_DEADLINE, PrefillRecorder.Event.ABORTED);
    }

    @Test
    void aTransferOpenedAndNeverWrittenIsAbortedAtItsDeadlineAndFreesItsBlocks() {
        prefill.close(Duration.ZERO);
        prefill = prefill(Duration.ofMillis(100));
        PrefillTransfer forgotten = prefill.open("forgotten", decodeAt(), 4, PrefillTransfer.Observer.NONE);

        assertThat(forgotten.aborted().block(WAIT)).contains("not written by the transfer's deadline");
        waitFor("no block owned", () -> prefill.blocks().owners() == 0);
        assertThat(prefill.blocks().free()).isEqualTo(prefill.blockCapacity());
        assertThat(prefill.running()).isZero();
    }

    @Test
    void aSideWithMoreBlocksThanItsLayoutAddressesIsRefused() {
        KvLayout small = KvLayout.rows(LAYERS, 16, 64);
        MemoryRegion local = engine.registerMemory(small.regionBytes(), 0);
        assertThatThrownBy(() -> PrefillSide.builder().layout(small)
                .sessions(DecodeSessions.of(engine.createSession(local, local)))
                .pipeline(WritePipeline.create()).blocks(17).bindNow())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("addresses 16");
    }

    @Test
    void anIdThatRanBeforeIsRefusedAsADuplicateWithNothingAllocated() {
        PrefillTransfer first = prefill.open("t-3", decodeAt(), 4, PrefillTransfer.Observer.NONE);
        first.close();

        assertThatThrownBy(() -> prefill.open("t-3", decodeAt(), 4, PrefillTransfer.Observer.NONE))
                .isInstanceOfSatisfying(TransferRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(TransferRefusedException.Reason.DUPLICATE));
        assertThat(events).contains(PrefillRecorder.Event.REFUSED_DUPLICATE);
    }

    @Test
    void aTransferNeedingMoreBlocksThanAreFreeIsRefused() {
        assertThatThrownBy(() -> prefill.open("huge", decodeAt(), prefill.blockCapacity() + 1,
                PrefillTransfer.Observer.NONE)).isInstanceOfSatisfying(TransferRefusedException.class,
                        e -> assertThat(e.reason()).isEqualTo(TransferRefusedException.Reason.OUT_OF_BLOCKS));
        assertThat(prefill.blocks().owners()).isZero();
    }
}
