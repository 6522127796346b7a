package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyRecorder;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/** Prefill's board of decode's block lists. */
class RemoteBlockBoardTest {

    private static NotifyMessage.RemoteBlocks blocks(String transferId, long... ids) {
        return new NotifyMessage.RemoteBlocks(transferId, transferId,
                java.util.Arrays.stream(ids).boxed().toList(), 0);
    }

    @Test
    void blockListThatArrivesBeforeItsRequestIsHandedOverAndForgotten() {
        RemoteBlockBoard board = new RemoteBlockBoard();
        board.accept(blocks("t-1", 7, 8));

        StepVerifier.create(board.blocks("t-1")).expectNext(List.of(7L, 8L)).expectComplete()
                .verify(Duration.ofSeconds(5));
        assertThat(board.size()).isZero();
    }

    @Test
    void blockListsNobodyAsksForAreDroppedOldestFirstBeyondTheCapacity() {
        RemoteBlockBoard board = new RemoteBlockBoard(3);
        for (int i = 0; i < 10; i++) {
            board.accept(blocks("t-" + i, i));
        }

        assertThat(board.size()).isEqualTo(3);
        StepVerifier.create(board.blocks("t-9")).expectNext(List.of(9L)).expectComplete().verify(Duration.ofSeconds(5));
        StepVerifier.create(board.blocks("t-0").timeout(Duration.ofMillis(50)))
                .expectError(java.util.concurrent.TimeoutException.class).verify(Duration.ofSeconds(5));
    }

    @Test
    void largeUnsolicitedBlockListsStayWithinTheByteBudgetAndDropsAreCounted() {
        MicrometerNotifyRecorder metrics = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        RemoteBlockBoard board = new RemoteBlockBoard(8L << 20, RemoteBlockBoard.DEFAULT_CAPACITY, metrics);
        long[] ids = java.util.stream.LongStream.range(1_000_000, 1_060_000).toArray();
        for (int i = 0; i < 50; i++) {
            board.accept(blocks("big-" + i, ids));
        }

        assertThat(board.unclaimedBytes()).isLessThanOrEqualTo(8L << 20);
        assertThat(metrics.count(NotifyEvent.EARLY_DROPPED)).isEqualTo(50 - board.size());
        assertThat(board.size()).isBetween(1, 6);
        StepVerifier.create(board.blocks("big-49")).expectNextMatches(list -> list.size() == 60_000).expectComplete()
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void listForAWaitingRequestIsHandedOverWhateverTheBudget() {
        RemoteBlockBoard board = new RemoteBlockBoard(1024, 4, NotifyRecorder.NOOP);
        var waiting = board.blocks("t-1").cache();
        waiting.subscribe();

        board.accept(blocks("t-1", java.util.stream.LongStream.range(0, 10_000).toArray()));

        StepVerifier.create(waiting).expectNextMatches(list -> list.size() == 10_000).expectComplete()
                .verify(Duration.ofSeconds(5));
        assertThat(board.size()).isZero();
    }
}
