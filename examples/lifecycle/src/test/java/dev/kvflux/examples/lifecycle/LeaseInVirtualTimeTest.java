package dev.kvflux.examples.lifecycle;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.transfer.BlockAllocator;
import dev.kvflux.transfer.DecodeSide;
import dev.kvflux.transfer.DecodeTransfer;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Decode's block lease, tested in virtual time: a minute and three quarters pass in a blink. */
class LeaseInVirtualTimeTest {
    private static final Duration RECEIVE_DEADLINE = Duration.ofSeconds(45);
    private static final Duration LEASE = Duration.ofSeconds(60);

    @Test
    void decodeFreesTheBlocksOfATransferPrefillNeverReleasesAtTheLease() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        List<NotifyEvent> channel = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = NotifyServer.builder().handler(message -> { }).bindNow(); // hears, never releases
             DecodeSide decode = DecodeSide.builder()
                     .blocks(64)
                     .receiveDeadline(RECEIVE_DEADLINE)
                     .blockLease(LEASE)
                     .notifyRecorder(channel::add)
                     .scheduler(clock) // the deadline, the lease, the reaper and the retries all run on it
                     .bindNow()) {
            DecodeTransfer t = decode.open("req-1", prefill.address(), 8, DecodeTransfer.Observer.NONE);
            t.close(); // the request ended before prefill said anything: decode tells prefill abort
            // the abort goes over real loopback: wait for prefill's acknowledgement before moving the clock, or
            // the acknowledgement's timeout, on the same clock, would pass first
            Mono.fromSupplier(() -> channel.contains(NotifyEvent.SENT)).filter(sent -> sent)
                    .repeatWhenEmpty(again -> again.delayElements(Duration.ofMillis(5)))
                    .block(Duration.ofSeconds(5));

            // a copy prefill started may still land until its own deadline, so the blocks stay quarantined for
            // the lease, counted from the receive deadline
            assertThat(decode.blocks().count(BlockAllocator.State.QUARANTINED)).isEqualTo(8);
            clock.advanceTimeBy(RECEIVE_DEADLINE.plus(LEASE).minusSeconds(1));
            assertThat(decode.blocks().count(BlockAllocator.State.QUARANTINED)).isEqualTo(8);

            clock.advanceTimeBy(Duration.ofSeconds(2)); // the reaper looks every second of the side's clock
            assertThat(decode.blocks().free()).isEqualTo(64);
            assertThat(decode.blocks().leaseExpired()).isEqualTo(1);
        } finally {
            clock.dispose();
        }
    }
}
