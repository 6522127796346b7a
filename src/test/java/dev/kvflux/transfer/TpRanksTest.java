package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.transfer.notify.NotifyCodec;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/** How a request's KV is cut between prefill's and decode's ranks. */
class TpRanksTest {

    @Test
    void prefillTwoToDecodeFourSendsEachPrefillRanksHeadsToTheTwoDecodeRanksThatSplitThem() {
        TpRanks tp = new TpRanks(2, 4);
        assertThat(tp.links()).isEqualTo(4);
        assertThat(List.of(0, 1, 2, 3).stream().map(tp::prefillRank).toList()).containsExactly(0, 0, 1, 1);
        assertThat(List.of(0, 1, 2, 3).stream().map(tp::decodeRank).toList()).containsExactly(0, 1, 2, 3);
        assertThat(tp.linksOfPrefillRank(1)).containsExactly(2, 3);
        assertThat(tp.linksOfDecodeRank(1)).containsExactly(1);
    }

    @Test
    void prefillFourToDecodeTwoJoinsTwoPrefillRanksHeadsOnEachDecodeRank() {
        TpRanks tp = new TpRanks(4, 2);
        assertThat(tp.links()).isEqualTo(4);
        assertThat(List.of(0, 1, 2, 3).stream().map(tp::prefillRank).toList()).containsExactly(0, 1, 2, 3);
        assertThat(List.of(0, 1, 2, 3).stream().map(tp::decodeRank).toList()).containsExactly(0, 0, 1, 1);
        assertThat(tp.linksOfDecodeRank(1)).containsExactly(2, 3);
    }

    @ParameterizedTest(name = "TP {0} → {1}")
    @CsvSource({"1,1", "1,2", "2,1", "2,4", "4,2", "4,8", "8,4", "1,8", "8,1", "64,64"})
    void everyLinkIsSentByExactlyOnePrefillRankAndReceivedByExactlyOneDecodeRank(int prefill, int decode) {
        TpRanks tp = new TpRanks(prefill, decode);
        Set<Integer> sent = new HashSet<>();
        for (int r = 0; r < prefill; r++) {
            for (int link : tp.linksOfPrefillRank(r)) {
                assertThat(sent.add(link)).as("link %d sent twice", link).isTrue();
                assertThat(tp.prefillRank(link)).isEqualTo(r);
            }
        }
        Set<Integer> received = new HashSet<>();
        for (int r = 0; r < decode; r++) {
            for (int link : tp.linksOfDecodeRank(r)) {
                assertThat(received.add(link)).as("link %d received twice", link).isTrue();
                assertThat(tp.decodeRank(link)).isEqualTo(r);
            }
        }
        assertThat(sent).hasSize(tp.links()).isEqualTo(received);
        // each rank's heads are the union of its links' shards: 1/tp of a block, as a role's rows hold it
        assertThat(tp.linksPerRank(prefill) * tp.shardBytes(1152L * 64)).isEqualTo(1152L * 64 / prefill);
        assertThat(tp.linksPerRank(decode) * tp.shardBytes(1152L * 64)).isEqualTo(1152L * 64 / decode);
    }

    @Test
    void oneLinkKeepsTheRequestsOwnIdAndSeveralGetOneEachThatNeverCollide() {
        assertThat(TpRanks.SINGLE.linkId("req-1", 0)).isEqualTo("req-1");
        TpRanks tp = new TpRanks(2, 4);
        assertThat(List.of(0, 1, 2, 3).stream().map(k -> tp.linkId("req-1", k)).toList())
                .containsExactly("req-1#0", "req-1#1", "req-1#2", "req-1#3");
    }

    @Test
    void anIdThatLeavesNoRoomForTheLinkNumberIsRefusedSayingHowLongItMayBe() {
        TpRanks tp = new TpRanks(1, 8);
        assertThat(tp.linkId("x".repeat(TpRanks.MAX_REQUEST_ID_BYTES), 7)).hasSize(TpRanks.MAX_REQUEST_ID_BYTES + 2);
        assertThatThrownBy(() -> tp.linkId("x".repeat(NotifyCodec.MAX_ID_BYTES - 1), 7))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(
                        "keep it to " + TpRanks.MAX_REQUEST_ID_BYTES + " bytes");
    }

    @ParameterizedTest
    @CsvSource({"0", "3", "6", "128", "-2"})
    void aTpSizeThatIsNotAPowerOfTwoUpToSixtyFourIsRefused(int size) {
        assertThatThrownBy(() -> new TpRanks(size, 1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("prefill's TP size must be a power of two in 1..64 (1, 2, 4, 8 …), got " + size);
        assertThatThrownBy(() -> new TpRanks(1, size)).hasMessageStartingWith("decode's TP size");
    }

    @Test
    void aBlockThatDoesNotSplitIntoTheShardsIsRefused() {
        assertThatThrownBy(() -> new TpRanks(8, 1).shardBytes(1000 + 4))
                .hasMessageContaining("does not split evenly into 8 shards");
    }
}
