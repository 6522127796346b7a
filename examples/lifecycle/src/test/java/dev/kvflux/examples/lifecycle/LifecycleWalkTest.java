package dev.kvflux.examples.lifecycle;

import static dev.kvflux.examples.lifecycle.TransferLifecycle.BLOCKS_PER_REQUEST;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.LAYERS;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.decodeSide;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.forwardPass;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.prefillSide;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.receive;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.send;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.DecodeTransfer;
import dev.kvflux.transfer.HandshakeSessions;
import dev.kvflux.transfer.PrefillSide;
import dev.kvflux.transfer.PrefillTransfer;
import dev.kvflux.transfer.ReceiveFailedException;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The walk of docs/lifecycle.md beyond one transfer: the handshake, READ mode, a decode restart and the recorders,
 * between two sides over loopback on two simulated engines (one per side, as in two processes), in real time.
 */
class LifecycleWalkTest {
    private static final Duration WITHIN = Duration.ofSeconds(30);
    private static final Consumer<String> QUIET = step -> { };

    @Test
    void prefillWritesThroughTheSessionItOpensFromTheRegionDecodeDescribes() {
        try (SimulatedXgmiEngine prefillEngine = SimulatedXgmiEngine.create();
             SimulatedXgmiEngine decodeEngine = SimulatedXgmiEngine.create();
             HandshakeSessions decodes = LifecycleSetups.intoDecodes(prefillEngine);
             DecodeSide decode = LifecycleSetups.writtenDecode(decodeEngine).bindNow();
             PrefillSide prefill = LifecycleSetups.writingPrefill(decodes).bindNow()) {
            WriteOutcome outcome = Mono.zip(receive(decode, prefill.notifyAddress(), "req-1", QUIET).thenReturn(true),
                    send(prefill, decode.notifyAddress(), "req-1", QUIET)).block(WITHIN).getT2();

            assertThat(outcome).isEqualTo(new WriteOutcome.WriteDone("req-1"));
        }
    }

    @Test
    void inReadModeDecodeReadsEachLayerFromPrefillsBlocksAndHandsItOnInOrder() {
        try (SimulatedXgmiEngine prefillEngine = SimulatedXgmiEngine.create();
             SimulatedXgmiEngine decodeEngine = SimulatedXgmiEngine.create();
             HandshakeSessions prefills = LifecycleSetups.intoPrefills(decodeEngine);
             DecodeSide decode = LifecycleSetups.readingDecode(prefills).bindNow();
             PrefillSide prefill = LifecycleSetups.readPrefill(prefillEngine).bindNow()) {
            DecodeTransfer t = decode.open("req-2", prefill.notifyAddress(), BLOCKS_PER_REQUEST,
                    DecodeTransfer.Observer.NONE);
            var layers = t.layers().collectList().toFuture();
            var kv = t.kv().doFinally(signal -> t.close()).toFuture();
            PrefillTransfer sending = prefill.open("req-2", decode.notifyAddress(), BLOCKS_PER_REQUEST,
                    PrefillTransfer.Observer.NONE);

            assertThat(sending.write(forwardPass()).block(WITHIN)).isEqualTo(new WriteOutcome.WriteDone("req-2"));
            assertThat(kv).succeedsWithin(WITHIN);
            assertThat(layers).succeedsWithin(WITHIN).isEqualTo(List.of(0, 1, 2, 3));
            Await.until("prefill's blocks come back with decode's release", () -> prefill.blocks().owners() == 0);
        }
    }

    @Test
    void aRestartedDecodeHasANewIncarnationAndWhatThePreviousOneWaitedForStops() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            DecodeSide first = decodeSide().bindNow();
            int port = first.notifyAddress().getPort();
            var kv = receive(first, prefill.notifyAddress(), "req-3", QUIET).toFuture();
            // the prompt's forward pass is still running when decode goes down
            List<LayerEvent> running = Collections.nCopies(LAYERS, SimulatedLayerEvent.never());
            PrefillTransfer sending = prefill.open("req-3", first.notifyAddress(), BLOCKS_PER_REQUEST,
                    PrefillTransfer.Observer.NONE);
            sending.write(running).subscribe();
            first.close();

            assertThat(kv).failsWithin(WITHIN).withThrowableThat().havingCause()
                    .isInstanceOf(ReceiveFailedException.class)
                    .satisfies(e -> assertThat(((ReceiveFailedException) e).kind())
                            .isEqualTo(ReceiveFailedException.Kind.SHUTTING_DOWN));
            assertThat(sending.aborted().block(WITHIN)).startsWith("decode aborted it: decode is shutting down");

            // the same address, a new incarnation: prefill fences what it had for the previous one
            try (DecodeSide second = decodeSide().notifyAddress("127.0.0.1", port).bindNow()) {
                assertThat(second.incarnation()).isNotEqualTo(first.incarnation());
                WriteOutcome outcome = Mono.zip(receive(second, prefill.notifyAddress(), "req-4", QUIET).thenReturn(true),
                        send(prefill, second.notifyAddress(), "req-4", QUIET)).block(WITHIN).getT2();
                assertThat(outcome).isEqualTo(new WriteOutcome.WriteDone("req-4"));
            }
        }
    }

    @Test
    void theRecordersHearEachSideAndTheirNotifyChannel() {
        LifecycleSetups.Recorded recorded = new LifecycleSetups.Recorded();
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().recorder(recorded).notifyRecorder(recorded).bindNow();
             PrefillSide prefill = prefillSide(engine).recorder(recorded).notifyRecorder(recorded).bindNow()) {
            Mono.when(receive(decode, prefill.notifyAddress(), "req-5", QUIET),
                    send(prefill, decode.notifyAddress(), "req-5", QUIET)).block(WITHIN);
            Await.until("decode hears prefill's release", () -> recorded.events.contains("decode RELEASE"));
        }
        assertThat(recorded.events).contains("prefill written WriteDone", "decode wait write_done",
                "prefill RELEASE_SENT", "notify SENT", "notify RECEIVED");
    }
}
