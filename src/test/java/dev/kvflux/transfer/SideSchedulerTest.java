package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WritePipeline;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyRecorder;
import dev.kvflux.transfer.notify.NotifyServer;
import dev.kvflux.bindings.StatusCode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.netty.resources.LoopResources;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * The sides' builders take the scheduler their timers run on and the event loops their notify channel runs on: the
 * receive deadline, the block lease and the transfer's deadline pass in virtual time, with no global scheduler
 * installed.
 */
class SideSchedulerTest {
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final Duration DEADLINE = Duration.ofSeconds(10);
    private static final Duration LEASE = Duration.ofSeconds(60);

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final List<AutoCloseable> open = new CopyOnWriteArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
        clock.dispose();
    }

    /** A notify address nothing listens on: a prefill that is gone. */
    private static InetSocketAddress nobody() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return new InetSocketAddress("127.0.0.1", probe.getLocalPort());
        }
    }

    @Test
    void quarantinedBlocksAreFreedAtTheLeaseInVirtualTime() throws Exception {
        NotifyServer prefill = NotifyServer.builder().handler(m -> { }).bindNow(); // takes the abort, never releases
        open.add(prefill);
        List<NotifyEvent> sent = new CopyOnWriteArrayList<>();
        DecodeSide decode = DecodeSide.builder().blocks(16).receiveDeadline(DEADLINE).blockLease(LEASE).scheduler(clock)
                .notifyRecorder(sent::add).bindNow();
        open.add(() -> decode.close(Duration.ZERO));
        DecodeTransfer t = decode.open("lease-1", prefill.address(), 4, DecodeTransfer.Observer.NONE);
        t.close(); // prefill never says release: the blocks stay quarantined for the lease after the receive deadline
        // no notify client may schedule on the clock from its event loop while the test moves it: a move made while
        // another thread drains the clock returns before its tasks have run
        waitFor(() -> sent.contains(NotifyEvent.SENT));

        assertThat(decode.blocks().count(BlockAllocator.State.QUARANTINED)).isEqualTo(4);
        clock.advanceTimeBy(DEADLINE.plus(LEASE).minusSeconds(1));
        assertThat(decode.blocks().count(BlockAllocator.State.QUARANTINED)).as("a second before the lease ends")
                .isEqualTo(4);
        clock.advanceTimeBy(Duration.ofSeconds(2)); // the reaper runs every second of the side's clock
        assertThat(decode.blocks().free()).isEqualTo(16);
        assertThat(decode.blocks().leaseExpired()).isEqualTo(1);
    }

    @Test
    void theReceiveDeadlinePassesInVirtualTime() throws Exception {
        NotifyServer prefill = NotifyServer.builder().handler(m -> { }).bindNow(); // takes the block list, never writes
        open.add(prefill);
        List<NotifyEvent> sent = new CopyOnWriteArrayList<>();
        DecodeSide decode = DecodeSide.builder().receiveDeadline(DEADLINE).scheduler(clock)
                .notifyRecorder(event -> sent.add(event)).bindNow();
        open.add(() -> decode.close(Duration.ZERO));
        DecodeTransfer t = decode.open("deadline-1", prefill.address(), 4, DecodeTransfer.Observer.NONE);
        CompletableFuture<Void> kv = t.kv().toFuture();
        // the block list's acknowledgement comes over real loopback: wait for it before moving the clock, or its
        // timeout (on the same clock) would pass first
        waitFor(() -> sent.contains(NotifyEvent.SENT));

        clock.advanceTimeBy(DEADLINE.minusMillis(1));
        assertThat(kv).as("1 ms before the deadline").isNotDone();
        clock.advanceTimeBy(Duration.ofMillis(1));
        assertThat(kv).failsWithin(WAIT).withThrowableOfType(ExecutionException.class)
                .havingCause().isInstanceOfSatisfying(ReceiveFailedException.class,
                        e -> assertThat(e.kind()).isEqualTo(ReceiveFailedException.Kind.DEADLINE));
        t.close();
    }

    @Test
    void anUnwrittenPrefillTransferIsAbortedAtItsDeadlineInVirtualTime() throws IOException {
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            KvLayout layout = KvLayout.rows(2, 64, 64);
            MemoryRegion local = engine.registerMemory(layout.regionBytes(), 0);
            MemoryRegion remote = new MemoryRegion("decode", 0, layout.regionBytes(), 1);
            PrefillSide prefill = PrefillSide.builder().layout(layout).blocks(64)
                    .sessions(DecodeSessions.of(engine.createSession(local, remote)))
                    .pipeline(WritePipeline.builder().waitStrategy(CompletionWait.failFast(Duration.ofSeconds(2))
                            .scheduler(clock)).build())
                    .transferTimeout(Duration.ofSeconds(2)).decodeDeadline(DEADLINE).scheduler(clock).bindNow();
            open.add(() -> prefill.close(Duration.ZERO));
            prefill.open("unwritten-1", nobody(), 4, PrefillTransfer.Observer.NONE);

            clock.advanceTimeBy(DEADLINE.minusSeconds(1));
            assertThat(prefill.running()).as("before its deadline").isEqualTo(1);
            clock.advanceTimeBy(Duration.ofSeconds(2));
            assertThat(prefill.running()).as("aborted at its deadline: nobody wrote it").isZero();
            assertThat(prefill.blocks().free()).isEqualTo(64);
            clock.advanceTimeBy(DEADLINE); // its release towards the decode that is gone gives up: close waits for nothing
        }
    }

    @Test
    void theNotifyChannelRunsOnTheLoopsGiven() throws Exception {
        LoopResources loops = LoopResources.create("side-loops-test", 1, true);
        List<String> receivedOn = new CopyOnWriteArrayList<>();
        NotifyRecorder threads = new NotifyRecorder() {
            @Override
            public void record(NotifyEvent event) {
                if (event == NotifyEvent.RECEIVED) {
                    receivedOn.add(Thread.currentThread().getName());
                }
            }
        };
        DecodeSide decode = DecodeSide.builder().loops(loops).notifyRecorder(threads).bindNow();
        try (NotifyClient client = NotifyClient.builder().loops(loops).build()) {
            assertThat(client.send(decode.notifyAddress(), new NotifyMessage.WriteFailed("nobody's", StatusCode.ERR_RDMA_OP,
                    "link down"), WAIT).block(WAIT)).isTrue();
        } finally {
            decode.close(Duration.ZERO);
        }
        loops.disposeLater(Duration.ZERO, WAIT).block(WAIT);

        assertThat(receivedOn).singleElement().asString().startsWith("side-loops-test");
    }

    private static void waitFor(java.util.function.BooleanSupplier condition) throws InterruptedException {
        long until = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - until).as("waited " + WAIT).isNegative();
            Thread.sleep(5);
        }
    }
}
