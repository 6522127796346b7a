package dev.kvflux.examples.lifecycle;

import static dev.kvflux.examples.lifecycle.TransferLifecycle.LAYOUT;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.RECEIVE_DEADLINE;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.ROW_BLOCKS;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.TRANSFER_TIMEOUT;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.DecodeRecorder;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.HandshakeSessions;
import dev.kvflux.transfer.KvLayout;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.LayerReads;
import dev.kvflux.transfer.PrefillRecorder;
import dev.kvflux.transfer.PrefillSide;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyRecorder;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What docs/lifecycle.md shows beyond {@link TransferLifecycle}: a KV region described to the peer
 * ({@link KvRegion}), WRITE mode with that handshake, READ mode, and recorders that keep what the sides report.
 */
public final class LifecycleSetups {
    private LifecycleSetups() {
    }

    /**
     * Where a side's KV lives, as the other side's engine needs it: {@code local}, registered with {@code engine}
     * ({@code engine.registerMemory(bytes, device)}), described by the engine's own packed descriptors, with the rows
     * of {@code layout}. Decode sends it with every block list in WRITE mode, prefill with every {@code read_ready}
     * in READ mode; the peer's {@link HandshakeSessions} opens its session from it.
     */
    public static KvRegion describe(DescribedEngine engine, MemoryRegion local, KvLayout.Rows layout) {
        return new KvRegion(engine.backend(), engine.engineDescriptor(), engine.memoryDescriptor(local),
                layout.rowBlocks(), layout.blockBytes());
    }

    /** WRITE mode with the handshake, decode's half: its region goes to prefill with every block list. */
    public static DecodeSide.Builder writtenDecode(DescribedEngine engine) {
        MemoryRegion kv = engine.registerMemory(LAYOUT.regionBytes(), 1);
        return DecodeSide.builder()
                .blocks(ROW_BLOCKS)
                .region(describe(engine, kv, LAYOUT))
                .receiveDeadline(RECEIVE_DEADLINE);
    }

    /**
     * WRITE mode with the handshake, prefill's half: {@code sessions} opens one session per decode incarnation
     * from the region decode describes, and closes it once that incarnation is gone and its writes have drained.
     */
    public static PrefillSide.Builder writingPrefill(HandshakeSessions sessions) {
        return PrefillSide.builder()
                .layout(LAYOUT)
                .blocks(ROW_BLOCKS)
                .sessions(sessions)
                .pipeline(WritePipeline.builder().waitStrategy(CompletionWait.failFast(TRANSFER_TIMEOUT)).build())
                .transferTimeout(TRANSFER_TIMEOUT)
                .decodeDeadline(RECEIVE_DEADLINE);
    }

    /** Prefill's sessions into the decodes that describe their KV: from its own region of {@code engine}. */
    public static HandshakeSessions intoDecodes(DescribedEngine engine) {
        MemoryRegion kv = engine.registerMemory(LAYOUT.regionBytes(), 0);
        return HandshakeSessions.of(engine, kv, LAYOUT);
    }

    /**
     * READ mode, prefill's half: it keeps the KV in its own blocks, tells decode {@code read_ready} with its region
     * once every layer's event is ready, and holds the blocks until decode says {@code release}.
     */
    public static PrefillSide.Builder readPrefill(DescribedEngine engine) {
        MemoryRegion kv = engine.registerMemory(LAYOUT.regionBytes(), 0);
        return PrefillSide.builder()
                .mode(KvMode.READ)
                .region(describe(engine, kv, LAYOUT))
                .layout(LAYOUT)
                .blocks(ROW_BLOCKS)
                .pipeline(WritePipeline.builder().waitStrategy(CompletionWait.failFast(TRANSFER_TIMEOUT)).build())
                .transferTimeout(TRANSFER_TIMEOUT)
                .decodeDeadline(RECEIVE_DEADLINE);
    }

    /**
     * READ mode, decode's half: {@code prefills} ({@link HandshakeSessions#intoPrefills}) opens a session into
     * each prefill incarnation's region from its {@code read_ready}; one read per layer, each behind its own
     * drain barrier; decode's TP size 1.
     */
    public static DecodeSide.Builder readingDecode(HandshakeSessions prefills) {
        return DecodeSide.builder()
                .blocks(ROW_BLOCKS)
                .readFrom(prefills, LAYOUT, LayerReads.of(TRANSFER_TIMEOUT), 1)
                .receiveDeadline(RECEIVE_DEADLINE);
    }

    /** Decode's sessions into the prefills that describe their KV: from its own region of {@code engine}. */
    public static HandshakeSessions intoPrefills(DescribedEngine engine) {
        MemoryRegion kv = engine.registerMemory(LAYOUT.regionBytes(), 1);
        return HandshakeSessions.intoPrefills(engine, kv, LAYOUT);
    }

    /**
     * Keeps every report of both sides and of their notify channel, in order; give it to
     * {@code recorder(...)} and {@code notifyRecorder(...)}. kvflux-micrometer's {@code MicrometerNotifyRecorder}
     * turns the channel's into meters.
     */
    public static final class Recorded implements PrefillRecorder, DecodeRecorder, NotifyRecorder {
        /** The events, as {@code "prefill ABORTED"}, {@code "decode ABORT_SENT"}, {@code "notify SENT"}. */
        public final List<String> events = new CopyOnWriteArrayList<>();

        @Override
        public void record(PrefillRecorder.Event event, String transferId) {
            events.add("prefill " + event);
        }

        @Override
        public void written(WriteOutcome outcome, Duration sinceOpen) {
            events.add("prefill written " + outcome.getClass().getSimpleName());
        }

        @Override
        public void record(DecodeRecorder.Event event, String transferId) {
            events.add("decode " + event);
        }

        @Override
        public void kvWaitEnded(DecodeRecorder.WaitOutcome outcome, long nanos) {
            events.add("decode wait " + outcome.tag());
        }

        @Override
        public void record(NotifyEvent event) {
            events.add("notify " + event);
        }
    }
}
