package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetSocketAddress;
import org.junit.jupiter.api.Test;

/** The fence prefill keeps of aborted and ended transfer ids. */
class PrefillTransfersTest {
    private static final InetSocketAddress DECODE = InetSocketAddress.createUnresolved("127.0.0.1", 7002);

    @Test
    void aFencedIdKeepsAShortReasonHoweverLongThePeersReasonWas() {
        PrefillTransfers transfers = new PrefillTransfers();
        String peers = "decode aborted it: " + "\\u0001".repeat(200);
        transfers.fence("early", "was aborted (" + peers + ")");
        PrefillTransfer t = transfers.open("late", () -> transfer("late"));
        t.markAborted(peers);
        t.end();
        transfers.closed(t, "was aborted (" + t.abortReason() + ")");

        for (String id : new String[] {"early", "late"}) {
            assertThatThrownBy(() -> transfers.open(id, () -> transfer(id)))
                    .isInstanceOf(TransferRefusedException.class)
                    .satisfies(e -> assertThat(((TransferRefusedException) e).reason())
                            .isEqualTo(TransferRefusedException.Reason.DUPLICATE))
                    .hasMessageContaining("was aborted (decode aborted it: \\u0001")
                    .satisfies(e -> assertThat(e.getMessage().length())
                            .as("what the fence keeps per id is bounded").isLessThanOrEqualTo(
                                    PrefillTransfers.FENCE_REASON_CHARS + id.length() + 80));
        }
    }

    @Test
    void aRunningIdIsRefusedAndAFreshOneIsNot() {
        PrefillTransfers transfers = new PrefillTransfers();
        transfers.open("a", () -> transfer("a"));
        assertThatThrownBy(() -> transfers.open("a", () -> transfer("a")))
                .isInstanceOf(TransferRefusedException.class).hasMessageContaining("is already running");
        assertThat(transfers.open("b", () -> transfer("b")).id()).isEqualTo("b");
        assertThat(transfers.size()).isEqualTo(2);
    }

    private static PrefillTransfer transfer(String id) {
        return new PrefillTransfer(null, id, DECODE, 0, 0, PrefillTransfer.Observer.NONE);
    }
}
