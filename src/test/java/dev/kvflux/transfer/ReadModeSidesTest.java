package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.scheduler.Schedulers;

/** READ mode between the two sides over loopback on the simulated engine: who holds which blocks, and until when. */
class ReadModeSidesTest {
    private static final int LAYERS = 3;
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final KvLayout.Rows LAYOUT = new KvLayout.Rows(LAYERS, 1024, 64);

    private final SimulatedXgmiEngine prefillEngine = SimulatedXgmiEngine.create();
    private final SimulatedXgmiEngine decodeEngine = SimulatedXgmiEngine.create();
    private final List<PrefillRecorder.Event> events = new CopyOnWriteArrayList<>();
    private final List<AutoCloseable> open = new CopyOnWriteArrayList<>();

    private PrefillSide prefill(Duration readLease) {
        MemoryRegion local = prefillEngine.registerMemory(LAYOUT.regionBytes(), 0);
        KvRegion region = new KvRegion(prefillEngine.backend(), prefillEngine.engineDescriptor(),
                prefillEngine.memoryDescriptor(local), LAYOUT.rowBlocks(), LAYOUT.blockBytes());
        PrefillSide side = PrefillSide.builder().mode(KvMode.READ).region(region).layout(LAYOUT)
                .pipeline(WritePipeline.builder().waitStrategy(CompletionWait.failFast(Duration.ofSeconds(2))).build())
                .blocks(1024).transferTimeout(Duration.ofSeconds(2)).decodeDeadline(Duration.ofSeconds(3))
                .readLease(readLease)
                .recorder(new PrefillRecorder() {
                    @Override
                    public void record(Event event, String transferId) {
                        events.add(event);
                    }
                }).bindNow();
        open.add(() -> side.close(Duration.ZERO));
        return side;
    }

    private DecodeSide decode() {
        return decode(decodeEngine);
    }

    private DecodeSide decode(SimulatedXgmiEngine decodeEngine) {
        MemoryRegion local = decodeEngine.registerMemory(LAYOUT.regionBytes(), 0);
        HandshakeSessions prefills = HandshakeSessions.intoPrefills(decodeEngine, local, LAYOUT);
        DecodeSide side = DecodeSide.builder().receiveDeadline(Duration.ofSeconds(3))
                .readFrom(prefills, LAYOUT, LayerReads.of(Duration.ofSeconds(2)), 4).bindNow();
        open.add(side);
        open.add(prefills);
        return side;
    }

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
        prefillEngine.close();
        decodeEngine.close();
    }

    private static List<LayerEvent> ready() {
        return Collections.nCopies(LAYERS, SimulatedLayerEvent.readyAfter(Schedulers.parallel(), Duration.ZERO));
    }

    @Test
    void decodeReadsEveryLayerInOrderThenReleasesPrefillsBlocksAndFreesItsOwnAtTheEnd() {
        PrefillSide prefill = prefill(Duration.ofSeconds(30));
        DecodeSide decode = decode();
        DecodeTransfer receiving = decode.open("r-1", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        var layers = receiving.layers().collectList().toFuture();
        var kv = receiving.kv().toFuture();
        PrefillTransfer sending = prefill.open("r-1", decode.notifyAddress(), 4, PrefillTransfer.Observer.NONE);

        assertThat(sending.write(ready()).block(WAIT)).isEqualTo(new WriteOutcome.WriteDone("r-1"));
        assertThat(kv).succeedsWithin(WAIT);
        assertThat(layers).succeedsWithin(WAIT).isEqualTo(List.of(0, 1, 2));
        // prefill frees the blocks, then records the release: wait for both, not only the first
        waitFor(() -> prefill.blocks().owners() == 0 && events.contains(PrefillRecorder.Event.READ_RELEASED));
        assertThat(events).contains(PrefillRecorder.Event.READ_RELEASED).doesNotContain(
                PrefillRecorder.Event.READ_LEASE_EXPIRED);
        assertThat(decode.blocks().owners()).as("decode keeps its blocks while the request decodes").isEqualTo(1);
        receiving.close();
        assertThat(decode.blocks().owners()).as("its reads drained: freed at the end, not quarantined").isZero();
    }

    @Test
    void aDecodeThatNeverReleasesHasPrefillsBlocksFreedAtTheReadLease() throws Exception {
        PrefillSide prefill = prefill(Duration.ofMillis(300));
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        // a decode that asks for the KV, is told read_ready, and dies before it reads or says release
        try (NotifyServer silentDecode = NotifyServer.builder().handler(toDecode::add).bind().block(WAIT)) {
            PrefillTransfer sending = prefill.open("r-2", silentDecode.address(), 4, PrefillTransfer.Observer.NONE);
            var outcome = sending.write(ready()).toFuture();
            try (var client = dev.kvflux.transfer.notify.NotifyClient.builder().build()) {
                client.send(prefill.notifyAddress(), new NotifyMessage.RemoteBlocks("r-2", "r-2", List.of(5L, 6L, 7L, 8L),
                        0, 42), WAIT).block(WAIT);
            }
            assertThat(outcome).succeedsWithin(WAIT).isEqualTo(new WriteOutcome.WriteDone("r-2"));
            waitFor(() -> toDecode.stream().anyMatch(m -> m instanceof NotifyMessage.ReadReady));
            assertThat(prefill.blocks().owners()).as("held for decode's reads").isEqualTo(1);

            waitFor(() -> prefill.blocks().owners() == 0);
        }
        assertThat(prefill.blocks().owners()).isZero();
        assertThat(events).contains(PrefillRecorder.Event.READ_LEASE_EXPIRED);
    }

    @Test
    void aTransferAbortedAfterItOfferedItsKvKeepsItsBlocksUntilDecodeReleasesThem() throws Exception {
        PrefillSide prefill = prefill(Duration.ofSeconds(30));
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        // a decode told read_ready that is still reading when prefill's request is cancelled
        try (NotifyServer readingDecode = NotifyServer.builder().handler(toDecode::add).bind().block(WAIT);
             var client = dev.kvflux.transfer.notify.NotifyClient.builder().build()) {
            PrefillTransfer sending = prefill.open("r-7", readingDecode.address(), 4, PrefillTransfer.Observer.NONE);
            var outcome = sending.write(ready()).toFuture();
            client.send(prefill.notifyAddress(), new NotifyMessage.RemoteBlocks("r-7", "r-7", List.of(5L, 6L, 7L, 8L),
                    0, 42), WAIT).block(WAIT);
            assertThat(outcome).succeedsWithin(WAIT).isEqualTo(new WriteOutcome.WriteDone("r-7"));
            waitFor(() -> toDecode.stream().anyMatch(m -> m instanceof NotifyMessage.ReadReady));

            assertThat(sending.abort("the client went away")).isTrue();
            Thread.sleep(200);
            assertThat(prefill.blocks().owners()).as("held while decode may read them").isEqualTo(1);

            client.send(prefill.notifyAddress(), new NotifyMessage.Release("r-7", 42, prefill.incarnation(), 1), WAIT)
                    .block(WAIT);
            waitFor(() -> prefill.blocks().owners() == 0);
        }
        assertThat(prefill.blocks().owners()).as("freed on decode's release, long before the lease").isZero();
        assertThat(events).doesNotContain(PrefillRecorder.Event.READ_LEASE_EXPIRED);
    }

    @Test
    void aReadReadyNamingBlocksOutsidePrefillsRegionFailsTheRequestAndReadsNothing() throws Exception {
        DecodeSide decode = decode();
        MemoryRegion prefillKv = prefillEngine.registerMemory(LAYOUT.regionBytes(), 0);
        KvRegion region = new KvRegion(prefillEngine.backend(), prefillEngine.engineDescriptor(),
                prefillEngine.memoryDescriptor(prefillKv), LAYOUT.rowBlocks(), LAYOUT.blockBytes());
        try (NotifyServer fakePrefill = NotifyServer.builder().handler(m -> { }).bind().block(WAIT);
             var client = dev.kvflux.transfer.notify.NotifyClient.builder().build()) {
            DecodeTransfer receiving = decode.open("r-3", fakePrefill.address(), 2, DecodeTransfer.Observer.NONE);
            var kv = receiving.kv().toFuture();
            client.send(decode.notifyAddress(), new NotifyMessage.ReadReady("r-3", List.of(5L, 1_000_000L), 77,
                    decode.incarnation(), 0, region), WAIT).block(WAIT);

            assertThat(kv).failsWithin(WAIT).withThrowableOfType(java.util.concurrent.ExecutionException.class)
                    .havingCause().isInstanceOf(ReceiveFailedException.class)
                    .satisfies(e -> assertThat(((ReceiveFailedException) e).kind())
                            .isEqualTo(ReceiveFailedException.Kind.READ_FAILED))
                    .withMessageContaining("names blocks decode cannot read").withMessageContaining("1000000");
            receiving.close();
        }
        assertThat(decode.blocks().owners()).isZero();
    }

    @Test
    void aReadTransferThatHasEndedStartsNoReadsAndOneWhoseReadsStartedKeepsItsBlocksAtItsEnd() {
        PrefillSide prefill = prefill(Duration.ofSeconds(30));
        DecodeSide decode = decode();
        DecodeTransfer ended = decode.open("r-5", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        DecodeTransfer reading = decode.open("r-6", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);

        ended.close();
        assertThat(ended.startReads()).as("a read starting after the end, into blocks freed by it").isFalse();
        assertThat(reading.startReads()).isTrue();
        reading.close();

        // r-5 ended with no read started: its blocks went at once; r-6's reads may still land: its blocks wait
        assertThat(decode.blocks().owners()).isEqualTo(1);
    }

    @Test
    void aReadTransferEndedBeforeItsWriteSendsDecodeNoRelease() {
        PrefillSide prefill = prefill(Duration.ofSeconds(30));
        DecodeSide decode = decode();
        PrefillTransfer sending = prefill.open("r-4", decode.notifyAddress(), 4, PrefillTransfer.Observer.NONE);

        sending.abort("the client went away");
        waitFor(() -> prefill.blocks().owners() == 0);

        assertThat(prefill.blocks().owners()).isZero();
        assertThat(events).contains(PrefillRecorder.Event.ABORTED).as("decode takes no release in READ mode")
                .doesNotContain(PrefillRecorder.Event.RELEASE_SENT);
    }

    @Test
    void closingDecodeWaitsUntilItsReadsInFlightHaveDrained() {
        SimulatedXgmiEngine slow = SimulatedXgmiEngine.builder()
                .fault(dev.kvflux.bindings.sim.Fault.slow(0, Duration.ofMillis(600))).build();
        open.add(slow);
        PrefillSide prefill = prefill(Duration.ofSeconds(30));
        DecodeSide decode = decode(slow);
        DecodeTransfer receiving = decode.open("r-9", prefill.notifyAddress(), 4, DecodeTransfer.Observer.NONE);
        receiving.kv().doFinally(signal -> receiving.close()).subscribe(v -> { }, e -> { });
        PrefillTransfer sending = prefill.open("r-9", decode.notifyAddress(), 4, PrefillTransfer.Observer.NONE);
        assertThat(sending.write(ready()).block(WAIT)).isEqualTo(new WriteOutcome.WriteDone("r-9"));
        waitFor(() -> decode.readsInFlight() == 1);

        decode.close();
        assertThat(decode.readsInFlight()).as("close returns once no read writes into decode's memory").isZero();
    }

    private static void waitFor(BooleanSupplier condition) {
        long until = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean() && System.nanoTime() - until < 0) {
            Thread.onSpinWait();
        }
    }
}
