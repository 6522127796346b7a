package dev.kvflux.examples.lifecycle;

import static dev.kvflux.examples.lifecycle.TransferLifecycle.BLOCKS_PER_REQUEST;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.decodeSide;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.prefillSide;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.receive;
import static dev.kvflux.examples.lifecycle.TransferLifecycle.send;
import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.DecodeTransfer;
import dev.kvflux.transfer.PrefillSide;
import dev.kvflux.transfer.PrefillTransfer;
import dev.kvflux.transfer.ReceiveFailedException;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyEvent;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

/**
 * How one transfer ends on each side, with a {@link DecodeSide} and a {@link PrefillSide} talking over real
 * loopback sockets and writing on the simulated xGMI engine in real time (a request's copies take well under a
 * millisecond, its forward pass 20 ms). Each test starts its own engine and sides on free ports.
 */
class TransferLifecycleTest {
    /** The longest any one signal may take here; the transfers themselves take milliseconds. */
    private static final Duration WITHIN = Duration.ofSeconds(5);
    /**
     * A receive deadline short enough to wait for in a test. Decode retries its block list for half of it, which
     * must cover a connection on a loaded machine for the deadline, not the block list, to be what fails.
     */
    private static final Duration SHORT_DEADLINE = Duration.ofSeconds(1);
    private static final NotifyAuth SECRET = NotifyAuth.of("the-lifecycle-example-notify-secret");
    private static final Consumer<String> QUIET = step -> { };

    /**
     * The JVM's first notify connection loads Netty, its native transport and its resolver: half a second here,
     * more than the short deadline leaves for decode's block list. One transfer before the tests pays for that.
     */
    @BeforeAll
    static void warmUp() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            Mono.when(receive(decode, prefill.notifyAddress(), "warm-up", QUIET),
                    send(prefill, decode.notifyAddress(), "warm-up", QUIET)).block(WITHIN);
        }
    }

    @Test
    void aTransferCompletesWithWriteDoneOnPrefillAndTheKvOnDecode() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            StepVerifier kvArrives = StepVerifier.create(receive(decode, prefill.notifyAddress(), "req-done", QUIET))
                    .expectComplete()
                    .verifyLater();

            StepVerifier.create(send(prefill, decode.notifyAddress(), "req-done", QUIET))
                    .expectNext(new WriteOutcome.WriteDone("req-done"))
                    .expectComplete()
                    .verify(WITHIN);
            kvArrives.verify(WITHIN);
        }
    }

    @Test
    void aFailedCopyFailsDecodesWaitAndPrefillsWriteWithItsStatusCode() {
        // the engine's third batch, layer 2 of its first request, fails 1 ms after it is posted
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                     .fault(Fault.fail(2, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();
             DecodeSide decode = decodeSide().bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            StepVerifier kvFails = StepVerifier.create(receive(decode, prefill.notifyAddress(), "req-failed", QUIET))
                    .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(ReceiveFailedException.class,
                            failed -> {
                                assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.WRITE_FAILED);
                                assertThat(failed.code()).isEqualTo(StatusCode.ERR_GPU_OP);
                                assertThat(failed).hasMessageContaining("injected copy failure");
                            }))
                    .verifyLater();

            StepVerifier.create(send(prefill, decode.notifyAddress(), "req-failed", QUIET))
                    .assertNext(outcome -> assertThat(outcome).isInstanceOfSatisfying(WriteOutcome.WriteFailed.class,
                            failed -> {
                                assertThat(failed.code()).isEqualTo(StatusCode.ERR_GPU_OP);
                                assertThat(failed.reason()).contains("injected copy failure");
                            }))
                    .expectComplete()
                    .verify(WITHIN);
            kvFails.verify(WITHIN);
        }
    }

    @Test
    void decodesReceiveDeadlineFailsATransferPrefillNeverWritesAndPrefillHearsAbort() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().receiveDeadline(SHORT_DEADLINE).bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            // prefill takes the request, but its prompt never finishes: the transfer is never written
            PrefillTransfer stuck = prefill.open("req-late", decode.notifyAddress(), BLOCKS_PER_REQUEST,
                    PrefillTransfer.Observer.NONE);

            StepVerifier.create(receive(decode, prefill.notifyAddress(), "req-late", QUIET))
                    .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(ReceiveFailedException.class,
                            failed -> assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.DEADLINE)))
                    .verify(WITHIN);
            StepVerifier.create(stuck.aborted())
                    .assertNext(reason -> assertThat(reason).startsWith("decode aborted it").contains("receive deadline"))
                    .expectComplete()
                    .verify(WITHIN);
        }
    }

    @Test
    void anAbortedTransfersBlocksAreFreedOnBothSides() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().receiveDeadline(SHORT_DEADLINE).bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            PrefillTransfer stuck = prefill.open("req-late", decode.notifyAddress(), BLOCKS_PER_REQUEST,
                    PrefillTransfer.Observer.NONE);
            receive(decode, prefill.notifyAddress(), "req-late", QUIET).onErrorComplete().block(WITHIN);
            stuck.aborted().block(WITHIN);

            // prefill frees its source blocks once the drain is over (nothing was posted) and says release;
            // decode's blocks, quarantined since it closed the transfer, are freed by that release
            Await.until("prefill's blocks are all FREE", () -> allFree(prefill.blocks(), prefill.blockCapacity()));
            Await.until("decode's blocks are all FREE", () -> allFree(decode.blocks(), decode.blockCapacity()));
            assertThat(decode.blocks().leaseExpired()).as("blocks reclaimed by the lease instead").isZero();
        }
    }

    @Test
    void afterATransferCompletesBothSidesFreeTheirBlocksOnceDecodeClosesIt() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().bindNow();
             PrefillSide prefill = prefillSide(engine).bindNow()) {
            // decode's half by hand, to close the transfer when the test says so
            DecodeTransfer receiving = decode.open("req-freed", prefill.notifyAddress(), BLOCKS_PER_REQUEST,
                    DecodeTransfer.Observer.NONE);
            StepVerifier kvArrives = StepVerifier.create(receiving.kv()).expectComplete().verifyLater();
            send(prefill, decode.notifyAddress(), "req-freed", QUIET).block(WITHIN);
            kvArrives.verify(WITHIN);
            assertThat(inState(decode.blocks(), BlockAllocator.State.WRITING))
                    .as("decode keeps the KV's blocks while the request decodes").isEqualTo(BLOCKS_PER_REQUEST);

            receiving.close();

            Await.until("prefill's blocks are all FREE", () -> allFree(prefill.blocks(), prefill.blockCapacity()));
            Await.until("decode's blocks are all FREE", () -> allFree(decode.blocks(), decode.blockCapacity()));
            assertThat(decode.blocks().leaseExpired()).as("blocks reclaimed by the lease instead").isZero();
        }
    }

    @Test
    void decodeKeepsTheBlocksOfATransferNobodyReleasesQuarantinedUntilItsLease() {
        InetSocketAddress gone = unusedLoopbackAddress(); // a prefill that is not running
        Duration lease = Duration.ofMillis(500);
        try (DecodeSide decode = decodeSide().receiveDeadline(SHORT_DEADLINE).blockLease(lease).bindNow()) {
            StepVerifier.create(receive(decode, gone, "req-orphan", QUIET))
                    .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(ReceiveFailedException.class,
                            failed -> assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.UNDELIVERABLE)))
                    .verify(WITHIN);
            // the lease counts from the receive deadline, so prefill could still post a copy until then
            assertThat(inState(decode.blocks(), BlockAllocator.State.QUARANTINED)).isEqualTo(BLOCKS_PER_REQUEST);

            Await.until("decode's lease frees the blocks", () -> allFree(decode.blocks(), decode.blockCapacity()));
            assertThat(decode.blocks().leaseExpired()).isEqualTo(1);
        }
    }

    @Test
    void aSignedPairCompletesATransfer() {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().auth(SECRET).bindNow();
             PrefillSide prefill = prefillSide(engine).auth(SECRET).bindNow()) {
            StepVerifier kvArrives = StepVerifier.create(receive(decode, prefill.notifyAddress(), "req-signed", QUIET))
                    .expectComplete()
                    .verifyLater();

            StepVerifier.create(send(prefill, decode.notifyAddress(), "req-signed", QUIET))
                    .expectNext(new WriteOutcome.WriteDone("req-signed"))
                    .expectComplete()
                    .verify(WITHIN);
            kvArrives.verify(WITHIN);
        }
    }

    @Test
    void aSignedDecodeDoesNotHearAnUnsignedPrefill() {
        List<NotifyEvent> decodeHeard = new CopyOnWriteArrayList<>();
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeSide decode = decodeSide().auth(SECRET).receiveDeadline(SHORT_DEADLINE)
                     .notifyRecorder(decodeHeard::add).bindNow();
             PrefillSide prefill = prefillSide(engine).decodeDeadline(SHORT_DEADLINE).notifyWithin(SHORT_DEADLINE)
                     .bindNow()) {
            StepVerifier kvFails = StepVerifier.create(receive(decode, prefill.notifyAddress(), "req-unsigned", QUIET))
                    .expectError(ReceiveFailedException.class)
                    .verifyLater();
            // decode's signed block list is no message to the unsigned prefill either: its write fails unposted,
            // and it tells decode write_failed, unsigned
            StepVerifier.create(send(prefill, decode.notifyAddress(), "req-unsigned", QUIET))
                    .assertNext(outcome -> assertThat(outcome).isInstanceOf(WriteOutcome.WriteFailed.class))
                    .expectComplete()
                    .verify(WITHIN);
            kvFails.verify(WITHIN);

            Await.until("decode rejects prefill's unsigned write_failed",
                    () -> decodeHeard.contains(NotifyEvent.REJECTED_UNAUTHENTICATED));
            assertThat(decodeHeard).as("messages decode took from prefill").doesNotContain(NotifyEvent.RECEIVED);
        }
    }

    private static boolean allFree(BlockAllocator.Snapshot blocks, int capacity) {
        return inState(blocks, BlockAllocator.State.FREE) == capacity;
    }

    private static int inState(BlockAllocator.Snapshot blocks, BlockAllocator.State state) {
        return blocks.blocks().get(state);
    }

    /** A loopback address nothing listens on (a port the kernel just handed out and took back). */
    private static InetSocketAddress unusedLoopbackAddress() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return new InetSocketAddress(InetAddress.getLoopbackAddress(), socket.getLocalPort());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
