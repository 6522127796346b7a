package dev.kvflux.examples.lifecycle;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.DecodeSessions;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.DecodeTransfer;
import dev.kvflux.transfer.KvLayout;
import dev.kvflux.transfer.PrefillSide;
import dev.kvflux.transfer.PrefillTransfer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * How an embedder runs the prefill-to-decode lifecycle of kvflux-transfer: a {@link DecodeSide} and a
 * {@link PrefillSide} (here in one process, over loopback notify, on the simulated xGMI engine; in a deployment
 * each in its own), and one request's KV moved from prefill's blocks into decode's.
 *
 * <p>The request's life, as {@link #main} runs it:
 * <ol>
 *   <li>Decode gets the request first: {@link #receive} opens its transfer, which grants the blocks the KV is to
 *       land in, and waits for the KV; the wait sends prefill that block list ({@code remote_blocks}).</li>
 *   <li>Prefill runs the prompt: {@link #send} opens its transfer, which allocates its source blocks, and writes
 *       each layer into decode's blocks once the layer's GPU event is ready; when every copy has succeeded it
 *       tells decode {@code write_done} (or {@code write_failed}, with the status code and reason).</li>
 *   <li>Decode's wait completes (it would start decoding now) and it closes its transfer: its blocks stay
 *       quarantined until prefill says {@code release}.</li>
 *   <li>Prefill drains what it posted, frees its source blocks and says {@code release}; decode frees its
 *       blocks.</li>
 * </ol>
 * How each side's transfer can end otherwise is in {@link PrefillTransfer}'s and {@link DecodeTransfer}'s class
 * comments; the tests show the main ones.
 *
 * <p>Both sides keep to one {@link #LAYOUT}: the same layers, the same row of blocks, so that prefill can address
 * decode's blocks. The timings are this example's, chosen to run in a blink; the library's defaults are vLLM's
 * (a 30 s transfer timeout).
 */
public final class TransferLifecycle {
    /** Layers of the example's model: one batch of copies and one GPU event each. */
    public static final int LAYERS = 4;
    /** Blocks in one layer's row of the KV region, on each side: every block id either side hands out must fit. */
    public static final int ROW_BLOCKS = 64;
    /** Bytes per block per layer (the block size the simulated engine's timing is calibrated on). */
    public static final long BLOCK_BYTES = 32 * 1024;
    /** Blocks one request's KV takes. */
    public static final int BLOCKS_PER_REQUEST = 8;
    /** Where a request's KV lives on both sides: {@link #LAYERS} rows of {@link #ROW_BLOCKS} blocks. */
    public static final KvLayout.Rows LAYOUT = new KvLayout.Rows(LAYERS, ROW_BLOCKS, BLOCK_BYTES);
    /** The bound of prefill's completion wait, and of its drain before {@code release}. */
    public static final Duration TRANSFER_TIMEOUT = Duration.ofSeconds(2);
    /** How long decode waits for a request's KV: the timeout and a margin, so prefill's own failure comes first. */
    public static final Duration RECEIVE_DEADLINE = DecodeSide.defaultReceiveDeadline(TRANSFER_TIMEOUT);
    /** How long the simulated forward pass takes per layer: layer {@code l}'s event is ready {@code l + 1} of these in. */
    public static final Duration LAYER_TIME = Duration.ofMillis(5);

    private TransferLifecycle() {
    }

    /**
     * Decode's settings: its notify server on loopback, on a free port (the default), as many blocks as a row
     * holds, and the receive deadline. {@code bindNow()} starts it; the tests change a setting first (a shorter
     * deadline, a notify secret).
     */
    public static DecodeSide.Builder decodeSide() {
        return DecodeSide.builder()
                .blocks(ROW_BLOCKS)
                .receiveDeadline(RECEIVE_DEADLINE);
    }

    /**
     * Prefill's settings, writing through {@code engine}: its KV region registered with the engine, one session
     * from it into decode's region, the WRITE pipeline and the same timings as decode's. {@code bindNow()} starts
     * it.
     */
    public static PrefillSide.Builder prefillSide(TransferEngine engine) {
        MemoryRegion local = engine.registerMemory(LAYOUT.regionBytes(), 0);
        // decode's KV region as prefill's engine addresses it: on MoRI it comes from decode's memory descriptor;
        // the simulated engine moves no bytes and needs only its size
        MemoryRegion remote = new MemoryRegion("decode", 0, LAYOUT.regionBytes(), 1);
        WritePipeline pipeline = WritePipeline.builder()
                .waitStrategy(CompletionWait.failFast(TRANSFER_TIMEOUT)) // the side is told the same timeout below
                .maxInFlight(16)
                .build();
        return PrefillSide.builder()
                .layout(LAYOUT)
                .sessions(DecodeSessions.of(engine.createSession(local, remote)))
                .pipeline(pipeline)
                .blocks(ROW_BLOCKS)
                .transferTimeout(TRANSFER_TIMEOUT)
                .decodeDeadline(RECEIVE_DEADLINE);
    }

    /**
     * Decode's half of one request: opens transfer {@code transferId} on {@code decode}, its KV to come from the
     * prefill whose notify server is at {@code prefill}, and waits for the KV. The transfer is closed as soon as
     * the wait ends, whichever way, cancellation included ({@link Mono#using}), which quarantines its blocks
     * until prefill's {@code release} and tells prefill {@code abort} if prefill never said how its write ended.
     * A real decode would run its decode steps between the KV's arrival and the close.
     *
     * @param say told each step, in words
     * @return a {@code Mono} that completes once prefill's {@code write_done} has come, or errors with a
     *     {@link dev.kvflux.transfer.ReceiveFailedException} whose kind says why the KV will not come (a
     *     {@link dev.kvflux.transfer.TransferRefusedException} if decode refused the request); it signals on a
     *     notify event loop or on the deadline's timer. Each subscription is a new request.
     */
    public static Mono<Void> receive(DecodeSide decode, InetSocketAddress prefill, String transferId,
            Consumer<String> say) {
        return Mono.using(
                () -> {
                    DecodeTransfer t = decode.open(transferId, prefill, BLOCKS_PER_REQUEST, DecodeTransfer.Observer.NONE);
                    say.accept("decode:  opened " + transferId + ", granted blocks " + t.blocks()
                            + "; sends prefill the block list and waits for the KV");
                    return t;
                },
                // subscribing sends remote_blocks; the wait ends at write_done, write_failed or the receive deadline
                t -> t.kv()
                        .doOnSuccess(v -> say.accept("decode:  write_done for " + transferId
                                + ": the KV is in decode's blocks, decoding can start"))
                        .doOnError(e -> say.accept("decode:  no KV for " + transferId + ": " + e.getMessage())),
                t -> {
                    t.close();
                    say.accept("decode:  closed " + transferId + "; its blocks come back with prefill's release");
                });
    }

    /**
     * Prefill's half of one request: opens transfer {@code transferId} on {@code prefill}, towards the decode
     * whose notify server is at {@code decode}, and writes its layers as the prompt's forward pass finishes them
     * ({@link #forwardPass}). Prefill then tells decode the outcome, drains, frees its source blocks and says
     * {@code release} by itself.
     *
     * @param say told each step, in words
     * @return a {@code Mono} of the outcome decode is told ({@code WriteDone}, or {@code WriteFailed} with the
     *     status code and reason); empty if decode aborted the transfer instead. Signals on the WRITE pipeline's
     *     threads. A {@link dev.kvflux.transfer.TransferRefusedException} error if prefill refused the transfer.
     */
    public static Mono<WriteOutcome> send(PrefillSide prefill, InetSocketAddress decode, String transferId,
            Consumer<String> say) {
        return Mono.defer(() -> {
            PrefillTransfer t = prefill.open(transferId, decode, BLOCKS_PER_REQUEST, PrefillTransfer.Observer.NONE);
            say.accept("prefill: opened " + transferId + ", source blocks " + t.localBlocks() + "; writes " + LAYERS
                    + " layers as the forward pass finishes them");
            return t.write(forwardPass())
                    .doOnNext(outcome -> say.accept(switch (outcome) {
                        case WriteOutcome.WriteDone done -> "prefill: every copy of " + transferId
                                + " succeeded; tells decode write_done";
                        case WriteOutcome.WriteFailed failed -> "prefill: the write of " + transferId + " failed ("
                                + failed.code() + ": " + failed.reason() + "); tells decode write_failed";
                    }))
                    .switchIfEmpty(t.aborted()
                            .doOnNext(reason -> say.accept("prefill: " + transferId + " was aborted: " + reason))
                            .then(Mono.empty()));
        });
    }

    /**
     * One GPU event per layer, as the prompt's forward pass would record them: layer {@code l}'s turns ready
     * {@code (l + 1) * }{@link #LAYER_TIME} from now. On a GPU these are the events recorded after each layer's
     * attention; prefill posts a layer's copies only once its event is ready.
     */
    public static List<LayerEvent> forwardPass() {
        List<LayerEvent> events = new ArrayList<>(LAYERS);
        for (int layer = 0; layer < LAYERS; layer++) {
            events.add(SimulatedLayerEvent.readyAfter(Schedulers.parallel(), LAYER_TIME.multipliedBy(layer + 1)));
        }
        return events;
    }

    /** Runs one request end to end and prints one line per step. */
    public static void main(String[] args) {
        Consumer<String> say = System.out::println;
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            say.accept("decode:  notify server on " + hostPort(decode.notifyAddress()) + ", " + decode.blockCapacity()
                    + " blocks, receive deadline " + RECEIVE_DEADLINE.toMillis() + " ms");
            say.accept("prefill: notify server on " + hostPort(prefill.notifyAddress()) + ", " + prefill.blockCapacity()
                    + " blocks, transfer timeout " + TRANSFER_TIMEOUT.toMillis() + " ms, engine " + engine.backend());
            String id = "req-1";
            // both halves at once, as a proxy sends the request to both instances; decode's first, so that its
            // block list is on its way when prefill starts (prefill would wait for it anyway)
            Mono.when(receive(decode, prefill.notifyAddress(), id, say), send(prefill, decode.notifyAddress(), id, say))
                    .block(RECEIVE_DEADLINE.plusSeconds(1));
            // prefill frees its source blocks once its copies are terminal, then says release; decode frees its
            // blocks when that arrives: both a moment after the request ended
            awaitFree(prefill::blocks, prefill.blockCapacity());
            awaitFree(decode::blocks, decode.blockCapacity());
            say.accept("both:    every block is free again: prefill " + free(prefill.blocks()) + " of "
                    + prefill.blockCapacity() + ", decode " + free(decode.blocks()) + " of " + decode.blockCapacity());
        }
    }

    /** How many blocks are FREE in {@code snapshot}. */
    public static int free(BlockAllocator.Snapshot snapshot) {
        return snapshot.blocks().get(BlockAllocator.State.FREE);
    }

    /** Waits, polling every 5 ms, until all {@code capacity} blocks are FREE; fails after 5 s. */
    private static void awaitFree(Supplier<BlockAllocator.Snapshot> blocks, int capacity) {
        Mono.fromSupplier(blocks)
                .filter(snapshot -> free(snapshot) == capacity)
                .repeatWhenEmpty(ticks -> ticks.delayElements(Duration.ofMillis(5)))
                .block(Duration.ofSeconds(5));
    }

    private static String hostPort(InetSocketAddress address) {
        return address.getHostString() + ":" + address.getPort();
    }
}
