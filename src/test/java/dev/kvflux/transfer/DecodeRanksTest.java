package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

/**
 * A decode of two ranks receiving one request from a prefill of one rank (two links, one per decode rank): the
 * request's wait ends once, only when every link's notice came, and one link's failure ends every link.
 */
class DecodeRanksTest {
    private static final Duration WAIT = Duration.ofSeconds(5);
    private static final Duration DEADLINE = Duration.ofSeconds(30);

    private final List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
    private NotifyServer prefill;
    private NotifyClient client;
    private DecodeRanks decode;

    @BeforeEach
    void start() {
        prefill = NotifyServer.builder().handler(toPrefill::add).bind().block(WAIT);
        client = NotifyClient.builder().build();
        decode = DecodeRanks.of(List.of(rank(), rank()));
    }

    private static DecodeSide rank() {
        return DecodeSide.builder().receiveDeadline(DEADLINE).blocks(64).bindNow();
    }

    @AfterEach
    void stop() {
        decode.close();
        client.close();
        prefill.close();
    }

    private DecodeRanks.Transfer open(String id) {
        return decode.open(id, List.of(prefill.address()), 4, DecodeTransfer.Observer.NONE);
    }

    /** Prefill's notice for link {@code link}, sent to the decode rank that receives it. */
    private void tell(DecodeRanks.Transfer t, int link, NotifyMessage message) {
        InetSocketAddress rank = decode.ranks().get(t.tp().decodeRank(link)).notifyAddress();
        assertThat(client.send(rank, message, WAIT).block(WAIT)).isTrue();
    }

    private void blockListsArrived(String... ids) {
        waitFor(() -> toPrefill.stream().filter(m -> m instanceof NotifyMessage.RemoteBlocks).map(
                NotifyMessage::transferId).toList().containsAll(List.of(ids)));
    }

    @Test
    void eachDecodeRankAsksPrefillForItsOwnLinkWithBlocksOfItsOwn() {
        DecodeRanks.Transfer t = open("r-1");
        var kv = t.kv().toFuture();
        blockListsArrived("r-1#0", "r-1#1");
        assertThat(t.links()).extracting(DecodeTransfer::id).containsExactly("r-1#0", "r-1#1");
        assertThat(decode.ranks()).allSatisfy(side -> assertThat(side.blocks().owners()).isEqualTo(1));
        kv.cancel(true);
        t.close();
    }

    @Test
    void theRequestsKvIsThereOnlyOnceEveryPrefillRankItDependsOnHasReported() {
        DecodeRanks.Transfer t = open("r-2");
        CompletableFuture<Void> kv = t.kv().toFuture();
        blockListsArrived("r-2#0", "r-2#1");
        tell(t, 1, new NotifyMessage.WriteDone("r-2#1", 0, 0, 0));
        CompletableFuture<Void> linkOne = t.links().get(1).layers().then().toFuture();
        assertThat(linkOne).succeedsWithin(WAIT);
        assertThat(kv).as("link 0's prefill rank has not reported").isNotDone();

        tell(t, 0, new NotifyMessage.WriteDone("r-2#0", 0, 0, 0));
        assertThat(kv).succeedsWithin(WAIT);
        t.close();
    }

    @Test
    void aMissingRanksNoticeFailsTheRequestAtTheReceiveDeadlineOnEveryRank() {
        DecodeRanks.Transfer t = open("r-3");
        CompletableFuture<Void> linkZero = new CompletableFuture<>();
        StepVerifier.withVirtualTime(() -> t.kv())
                .then(() -> {
                    blockListsArrived("r-3#0", "r-3#1");
                    t.links().getFirst().layers().then().subscribe(null, linkZero::completeExceptionally,
                            () -> linkZero.complete(null));
                    tell(t, 0, new NotifyMessage.WriteDone("r-3#0", 0, 0, 0));
                    assertThat(linkZero).succeedsWithin(WAIT);
                })
                .thenAwait(DEADLINE.minusSeconds(1))
                .expectNoEvent(Duration.ofMillis(500))
                .thenAwait(Duration.ofSeconds(1))
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(ReceiveFailedException.class);
                    ReceiveFailedException failed = (ReceiveFailedException) e;
                    assertThat(failed.kind()).isEqualTo(ReceiveFailedException.Kind.DEADLINE);
                    assertThat(failed.transferId()).isEqualTo("r-3");
                    assertThat(failed.getMessage()).startsWith("link 1 of 2 (prefill rank 0 → decode rank 1): no"
                            + " write_done or write_failed for transfer r-3#1 within 30s");
                })
                .verify(WAIT);
        t.close();
        assertThat(decode.ranks()).allSatisfy(side -> assertThat(side.running()).as("every rank's link ended")
                .isZero());
        // the rank whose notice never came tells its prefill rank to stop; the one that reported needs no abort
        waitFor(() -> toPrefill.stream().anyMatch(m -> m instanceof NotifyMessage.Abort a
                && a.transferId().equals("r-3#1")));
        assertThat(toPrefill).noneMatch(m -> m instanceof NotifyMessage.Abort a && a.transferId().equals("r-3#0"));
    }

    @Test
    void oneLinksWriteFailedFailsTheRequestOnceAndEndsTheOtherRanksLinkAtOnceWithTheReason() {
        DecodeRanks.Transfer t = open("r-4");
        CompletableFuture<Void> kv = t.kv().toFuture();
        CompletableFuture<Void> linkZero = t.links().getFirst().layers().then().toFuture();
        blockListsArrived("r-4#0", "r-4#1");
        tell(t, 1, new NotifyMessage.WriteFailed("r-4#1", StatusCode.ERR_RDMA_OP, "rank 1's copy failed", 0, 0, null));

        assertThat(kv).failsWithin(WAIT).withThrowableThat().havingRootCause()
                .isInstanceOfSatisfying(ReceiveFailedException.class, e -> {
                    assertThat(e.kind()).isEqualTo(ReceiveFailedException.Kind.WRITE_FAILED);
                    assertThat(e.code()).isEqualTo(StatusCode.ERR_RDMA_OP);
                    assertThat(e.getMessage()).startsWith("link 1 of 2 (prefill rank 0 → decode rank 1): ")
                            .contains("rank 1's copy failed");
                });
        assertThat(linkZero).as("decode rank 0 stops waiting without its deadline").failsWithin(WAIT)
                .withThrowableThat().havingRootCause().withMessageStartingWith("request r-4 failed on link 1 of 2");
        t.close();
        waitFor(() -> toPrefill.stream().anyMatch(m -> m instanceof NotifyMessage.Abort a
                && a.transferId().equals("r-4#0") && a.reason().contains("failed on link 1 of 2")));
        assertThat(toPrefill).noneMatch(m -> m instanceof NotifyMessage.Abort a && a.transferId().equals("r-4#1"));
    }

    @Test
    void aRankThatRefusesItsLinkLeavesNothingOpenOnTheOthers() {
        DecodeRanks small = DecodeRanks.of(List.of(rank(), DecodeSide.builder().blocks(2).bindNow()));
        try {
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> small.open("r-5", List.of(prefill.address()), 4,
                    DecodeTransfer.Observer.NONE)).isInstanceOf(TransferRefusedException.class);
            assertThat(small.ranks()).allSatisfy(side -> assertThat(side.running()).isZero());
        } finally {
            small.close();
        }
    }

    private static void waitFor(BooleanSupplier condition) {
        long end = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("condition not met within " + WAIT);
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }
}
