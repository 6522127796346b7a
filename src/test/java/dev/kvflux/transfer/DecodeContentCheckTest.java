package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** A content check that reads the KV itself runs off the notify loop, and one that cannot run fails its request. */
class DecodeContentCheckTest {

    /** A check that reads the KV back and fails doing so, as a GPU copy back to the host can. */
    private static final ContentCheck UNREADABLE = new ContentCheck() {
        @Override
        public long of(String transferId, List<Long> decodeBlocks) {
            throw new IllegalStateException("cudaMemcpy failed: cudaErrorIllegalAddress");
        }

        @Override
        public boolean blocking() {
            return true;
        }
    };

    @Test
    void aCheckThatCannotReadTheKvFailsTheRequestAsCorruptWithTheReasonInsteadOfLeavingItToTheDeadline()
            throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = NotifyServer.builder().handler(toPrefill::add).bind().block(Duration.ofSeconds(5));
             NotifyClient asPrefill = NotifyClient.create();
             DecodeSide decode = DecodeSide.builder().contentCheck(UNREADABLE).receiveDeadline(Duration.ofSeconds(60))
                     .bindNow()) {
            DecodeTransfer t = decode.open("t-1", prefill.address(), 2, DecodeTransfer.Observer.NONE);
            var kv = t.kv().toFuture();
            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-1", 0, 0, 42),
                    Duration.ofSeconds(5)).block();

            ReceiveFailedException failed = catchThrowableOfType(ReceiveFailedException.class, () -> {
                try {
                    kv.get(10, java.util.concurrent.TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    throw e.getCause();
                }
            });

            assertThat(failed).isNotNull();
            assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.CORRUPT);
            assertThat(failed.getMessage()).contains("could not read the KV", "cudaErrorIllegalAddress");
            t.close();
        }
    }

    @Test
    void aMismatchFoundAfterTheWaitEndedByItsDeadlineIsNotCountedAsCorruptKv() throws Exception {
        java.util.concurrent.CountDownLatch checking = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch deadlinePassed = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch returned = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<Thread> checker = new java.util.concurrent.atomic.AtomicReference<>();
        ContentCheck late = new ContentCheck() {
            @Override
            public long of(String transferId, List<Long> decodeBlocks) {
                checker.set(Thread.currentThread());
                checking.countDown();
                try {
                    deadlinePassed.await(); // the check reads blocks the deadline has freed meanwhile
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                returned.countDown();
                return 7; // not prefill's 42: the blocks hold something else by now
            }

            @Override
            public boolean blocking() {
                return true;
            }
        };
        List<DecodeRecorder.Event> events = new CopyOnWriteArrayList<>();
        DecodeRecorder recorder = new DecodeRecorder() {
            @Override
            public void record(Event event, String transferId) {
                events.add(event);
            }
        };
        try (NotifyServer prefill = NotifyServer.builder().handler(m -> { }).bind().block(Duration.ofSeconds(5));
             NotifyClient asPrefill = NotifyClient.create();
             DecodeSide decode = DecodeSide.builder().contentCheck(late).recorder(recorder)
                     .receiveDeadline(Duration.ofMillis(500)).bindNow()) {
            DecodeTransfer t = decode.open("t-2", prefill.address(), 2, DecodeTransfer.Observer.NONE);
            var kv = t.kv().toFuture();
            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-2", 0, 0, 42),
                    Duration.ofSeconds(5)).block();
            assertThat(checking.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();

            ReceiveFailedException failed = catchThrowableOfType(ReceiveFailedException.class, () -> {
                try {
                    kv.get(10, java.util.concurrent.TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    throw e.getCause();
                }
            });
            assertThat(failed.kind()).as("the receive deadline ended the wait first")
                    .isEqualTo(ReceiveFailedException.Kind.DEADLINE);
            deadlinePassed.countDown();
            assertThat(returned.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            // the check's task has run once its thread no longer runs DecodeNotices (it is back in its pool)
            while (java.util.Arrays.stream(checker.get().getStackTrace())
                    .anyMatch(frame -> frame.getClassName().equals(DecodeNotices.class.getName()))) {
                Thread.onSpinWait();
            }

            assertThat(events).as("the mismatch over freed blocks").doesNotContain(DecodeRecorder.Event.KV_CORRUPT);
            t.close();
        }
    }
}
