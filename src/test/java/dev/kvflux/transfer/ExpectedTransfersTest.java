package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.notify.NotifyCodec;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyMessage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/** Decode's registry on virtual time: deadlines, late and duplicate notifications, early arrivals. */
class ExpectedTransfersTest {
    private final MicrometerNotifyRecorder counts = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());

    @Test
    void decodeDeadlineFiresWhenNoNotificationComes() {
        ExpectedTransfers[] registry = new ExpectedTransfers[1];
        StepVerifier.withVirtualTime(() -> {
            registry[0] = ExpectedTransfers.withDeadline(Duration.ofMillis(3750)).recorder(counts);
            return registry[0].expect("t-1");
        })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(3749))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(ReceiveFailedException.class,
                        failed -> assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.DEADLINE))
                        .hasMessageContaining("t-1").hasMessageContaining("3.75s"))
                .verify(Duration.ofSeconds(5));
        assertThat(counts.count(NotifyEvent.DEADLINE_EXPIRED)).isEqualTo(1);
        assertThat(registry[0].pending()).isZero();
    }

    @Test
    void lateNotificationAfterTheDeadlineIsIgnoredAndCounted() {
        ExpectedTransfers[] registry = new ExpectedTransfers[1];
        StepVerifier.withVirtualTime(() -> {
            registry[0] = ExpectedTransfers.withDeadline(Duration.ofSeconds(1)).recorder(counts);
            return registry[0].expect("t-1");
        })
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(1))
                .expectError(ReceiveFailedException.class)
                .verify(Duration.ofSeconds(5));

        registry[0].accept(new NotifyMessage.WriteDone("t-1"));

        assertThat(counts.count(NotifyEvent.NOTICE_LATE_OR_DUPLICATE)).isEqualTo(1);
        assertThat(counts.count(NotifyEvent.NOTICE_WRITE_DONE)).isZero();
    }

    @Test
    void duplicateNotificationIsIgnoredAndCounted() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline().recorder(counts);
        StepVerifier.create(registry.expect("t-1"))
                .then(() -> registry.accept(new NotifyMessage.WriteDone("t-1")))
                .verifyComplete();

        registry.accept(new NotifyMessage.WriteDone("t-1"));
        registry.accept(new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, "again"));

        assertThat(counts.count(NotifyEvent.NOTICE_LATE_OR_DUPLICATE)).isEqualTo(2);
        assertThat(counts.count(NotifyEvent.NOTICE_WRITE_DONE)).isEqualTo(1);
    }

    @Test
    void finishedTransfersAreRememberedUpToTheCapacityOldestForgottenFirst() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline().recorder(counts);
        int transfers = ExpectedTransfers.FINISHED_CAPACITY + 10;
        for (int i = 0; i < transfers; i++) {
            registry.expect("t-" + i).subscribe(v -> { }, e -> { });
            registry.accept(new NotifyMessage.WriteDone("t-" + i));
        }

        assertThat(registry.remembered()).isEqualTo(ExpectedTransfers.FINISHED_CAPACITY);
        registry.accept(new NotifyMessage.WriteDone("t-" + (transfers - 1)));
        assertThat(counts.count(NotifyEvent.NOTICE_LATE_OR_DUPLICATE)).as("the newest is still fenced").isEqualTo(1);
        registry.accept(new NotifyMessage.WriteDone("t-0"));
        assertThat(counts.count(NotifyEvent.NOTICE_UNMATCHED)).as("the oldest was forgotten").isEqualTo(1);
    }

    @Test
    void notificationBeforeTheExpectSettlesItAtOnce() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(1)).recorder(counts);
        registry.accept(new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_GPU_OP, "copy failed"));

        StepVerifier.create(registry.expect("t-1"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(ReceiveFailedException.class,
                        failed -> assertThat(failed.code()).isEqualTo(StatusCode.ERR_GPU_OP)))
                .verify(Duration.ofSeconds(5));
        assertThat(counts.count(NotifyEvent.NOTICE_UNMATCHED)).isEqualTo(1);
    }

    @Test
    void transferIdExpectedTwiceIsRefused() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline().recorder(counts);
        registry.expect("t-1").subscribe(v -> { }, e -> { });

        StepVerifier.create(registry.expect("t-1"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferRefusedException.class)
                        .hasMessageContaining("own transfer id"))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void unsolicitedWriteFailedWithLargeReasonsStayWithinTheByteBudgetAndDropsAreCounted() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(5)).recorder(counts).earlyBudget(4L << 20);
        String reason = "x".repeat(1 << 20);
        for (int i = 0; i < 100; i++) {
            registry.accept(new NotifyMessage.WriteFailed("unsolicited-" + i, StatusCode.ERR_RDMA_OP, reason));
        }

        long[] early = registry.early();
        assertThat(early[1]).as("estimated bytes kept").isLessThanOrEqualTo(4L << 20);
        assertThat(early[0]).as("the newest still kept").isEqualTo(1);
        assertThat(counts.count(NotifyEvent.EARLY_DROPPED)).isEqualTo(99);
        StepVerifier.create(registry.expect("unsolicited-99")).expectError(ReceiveFailedException.class)
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void unsolicitedWriteFailedFromTheWireCarriesACutReason() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(5));
        for (int i = 0; i < 4300; i++) {
            registry.accept(NotifyCodec.decode(NotifyCodec.encode(new NotifyMessage.WriteFailed("u-" + i,
                    StatusCode.ERR_RDMA_OP, "y".repeat(64 * 1024)))));
        }

        assertThat(registry.early()[1]).as("4,300 notices of 64 KiB keep about 1 KiB each")
                .isLessThan(4300L * 4 * NotifyCodec.MAX_REASON_BYTES);
    }
}
