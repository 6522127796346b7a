package dev.kvflux.serving.role;

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
        PrefillTransfers.Transfer t = transfers.open("late", DECODE, 0);
        t.abort(peers);
        t.end();

        for (String id : new String[] {"early", "late"}) {
            assertThatThrownBy(() -> transfers.open(id, DECODE, 0))
                    .isInstanceOf(PrefillTransfers.FencedException.class)
                    .hasMessageContaining("was aborted (decode aborted it: \\u0001")
                    .satisfies(e -> assertThat(e.getMessage().length())
                            .as("what the fence keeps per id is bounded").isLessThanOrEqualTo(
                                    PrefillTransfers.FENCE_REASON_CHARS + id.length() + 80));
        }
    }
}
