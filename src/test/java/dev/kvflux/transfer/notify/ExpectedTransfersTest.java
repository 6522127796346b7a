package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/** Decode's registry on virtual time: deadlines, late and duplicate notifications, early arrivals. */
class ExpectedTransfersTest {

    @Test
    void decodeDeadlineFiresWhenNoNotificationComes() {
        ExpectedTransfers[] registry = new ExpectedTransfers[1];
        StepVerifier.withVirtualTime(() -> {
            registry[0] = ExpectedTransfers.withDeadline(Duration.ofMillis(3750));
            return registry[0].expect("t-1");
        })
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(3749))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(ReceiveDeadlineException.class)
                        .hasMessageContaining("t-1").hasMessageContaining("3750 ms"))
                .verify(Duration.ofSeconds(5));
        assertThat(registry[0].metrics().deadlinesExpired()).isEqualTo(1);
        assertThat(registry[0].pending()).isZero();
    }

    @Test
    void lateNotificationAfterTheDeadlineIsIgnoredAndCounted() {
        ExpectedTransfers[] registry = new ExpectedTransfers[1];
        StepVerifier.withVirtualTime(() -> {
            registry[0] = ExpectedTransfers.withDeadline(Duration.ofSeconds(1));
            return registry[0].expect("t-1");
        })
                .expectSubscription()
                .thenAwait(Duration.ofSeconds(1))
                .expectError(ReceiveDeadlineException.class)
                .verify(Duration.ofSeconds(5));

        registry[0].accept(new NotifyMessage.WriteDone("t-1"));

        assertThat(registry[0].metrics().lateOrDuplicate()).isEqualTo(1);
        assertThat(registry[0].metrics().writeDone()).isZero();
    }

    @Test
    void duplicateNotificationIsIgnoredAndCounted() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline();
        StepVerifier.create(registry.expect("t-1"))
                .then(() -> registry.accept(new NotifyMessage.WriteDone("t-1")))
                .verifyComplete();

        registry.accept(new NotifyMessage.WriteDone("t-1"));
        registry.accept(new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, "again"));

        assertThat(registry.metrics().lateOrDuplicate()).isEqualTo(2);
        assertThat(registry.metrics().writeDone()).isEqualTo(1);
    }

    @Test
    void finishedTransfersAreRememberedUpToTheCapacityOldestForgottenFirst() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline();
        int transfers = ExpectedTransfers.FINISHED_CAPACITY + 10;
        for (int i = 0; i < transfers; i++) {
            registry.expect("t-" + i).subscribe(v -> { }, e -> { });
            registry.accept(new NotifyMessage.WriteDone("t-" + i));
        }

        assertThat(registry.remembered()).isEqualTo(ExpectedTransfers.FINISHED_CAPACITY);
        registry.accept(new NotifyMessage.WriteDone("t-" + (transfers - 1)));
        assertThat(registry.metrics().lateOrDuplicate()).as("the newest is still fenced").isEqualTo(1);
        registry.accept(new NotifyMessage.WriteDone("t-0"));
        assertThat(registry.metrics().unmatched()).as("the oldest was forgotten").isEqualTo(1);
    }

    @Test
    void notificationBeforeTheExpectSettlesItAtOnce() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(1));
        registry.accept(new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_GPU_OP, "copy failed"));

        StepVerifier.create(registry.expect("t-1"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOfSatisfying(RemoteWriteFailedException.class,
                        failed -> assertThat(failed.code()).isEqualTo(StatusCode.ERR_GPU_OP)))
                .verify(Duration.ofSeconds(5));
        assertThat(registry.metrics().unmatched()).isEqualTo(1);
    }

    @Test
    void transferIdExpectedTwiceIsRefused() {
        ExpectedTransfers registry = ExpectedTransfers.withoutDeadline();
        registry.expect("t-1").subscribe(v -> { }, e -> { });

        StepVerifier.create(registry.expect("t-1"))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("own transfer id"))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void unsolicitedWriteFailedWithLargeReasonsStayWithinTheByteBudgetAndDropsAreCounted() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(5)).earlyBudget(4L << 20);
        String reason = "x".repeat(1 << 20);
        for (int i = 0; i < 100; i++) {
            registry.accept(new NotifyMessage.WriteFailed("unsolicited-" + i, StatusCode.ERR_RDMA_OP, reason));
        }

        long[] early = registry.early();
        assertThat(early[1]).as("estimated bytes kept").isLessThanOrEqualTo(4L << 20);
        assertThat(early[0]).as("the newest still kept").isEqualTo(1);
        assertThat(registry.metrics().earlyDropped()).isEqualTo(99);
        StepVerifier.create(registry.expect("unsolicited-99")).expectError(RemoteWriteFailedException.class)
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
