package dev.kvflux.serving.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.http.HttpJson;
import java.net.InetSocketAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every rank's notify address, as instances register it and as the proxy hands it to the peer. */
class RankAddressesTest {
    private static final InetSocketAddress HTTP = Instance.address("127.0.0.1:8200");
    private static final List<InetSocketAddress> RANKS = List.of(Instance.address("127.0.0.1:8201"),
            Instance.address("127.0.0.1:8202"), Instance.address("127.0.0.1:8203"), Instance.address("127.0.0.1:8204"));

    @Test
    void theProxyHandsThePeerEveryRanksAddressAndTheRoleReadsThemBackInRankOrder() {
        ObjectNode request = new KvTransferParams("t-1", Role.DECODE, RANKS).into(HttpJson.MAPPER.createObjectNode());

        assertThat(request.at("/kv_transfer_params/remote_notify").asText()).isEqualTo("127.0.0.1:8201");
        KvTransferParams read = KvTransferParams.from(request, Role.PREFILL);
        assertThat(read.remoteNotifyRanks()).isEqualTo(RANKS);
        assertThat(read.remoteNotify()).isEqualTo(RANKS.getFirst());
    }

    @Test
    void aPeerOfOneRankIsWrittenAsBeforeWithoutTheList() {
        ObjectNode request = new KvTransferParams("t-2", Role.PREFILL, RANKS.getFirst())
                .into(HttpJson.MAPPER.createObjectNode());

        assertThat(request.at("/kv_transfer_params").has("remote_notify_ranks")).isFalse();
        assertThat(KvTransferParams.from(request, Role.DECODE).remoteNotifyRanks()).containsExactly(RANKS.getFirst());
    }

    @Test
    void aRankListThatDoesNotStartWithRemoteNotifyOrIsNoPowerOfTwoIsRefused() {
        ObjectNode request = new KvTransferParams("t-3", Role.DECODE, RANKS).into(HttpJson.MAPPER.createObjectNode());
        ObjectNode params = (ObjectNode) request.get("kv_transfer_params");
        params.put("remote_notify", "127.0.0.1:9999");
        assertThatThrownBy(() -> KvTransferParams.from(request, Role.PREFILL))
                .hasMessageContaining("must start with remote_notify");

        params.put("remote_notify", "127.0.0.1:8201");
        ((com.fasterxml.jackson.databind.node.ArrayNode) params.get("remote_notify_ranks")).remove(3);
        assertThatThrownBy(() -> KvTransferParams.from(request, Role.PREFILL))
                .hasMessageContaining("decode's TP size must be a power of two").hasMessageContaining("got 3");
    }

    @Test
    void aRankListLongerThanSixtyFourIsRefusedBeforeItsEntriesAreRead() {
        ObjectNode request = new KvTransferParams("t-4", Role.DECODE, RANKS).into(HttpJson.MAPPER.createObjectNode());
        var list = ((ObjectNode) request.get("kv_transfer_params")).putArray("remote_notify_ranks");
        for (int i = 0; i < 65; i++) {
            list.add(i);
        }
        assertThatThrownBy(() -> KvTransferParams.from(request, Role.PREFILL))
                .hasMessageContaining("must be an array of 1..64");
    }

    @Test
    void anInstanceRegistersEveryRankAndTwoRanksOnOneAddressAreRefused() {
        Instance instance = new Instance(Role.DECODE, HTTP, RANKS.getFirst(), RANKS);
        ObjectNode json = instance.putRanks(HttpJson.MAPPER.createObjectNode());
        assertThat(Instance.ranks(json, "notify_ranks", RANKS.getFirst())).isEqualTo(RANKS);
        assertThat(instance.tp()).isEqualTo(4);
        assertThat(new Instance(Role.DECODE, HTTP, RANKS.getFirst()).putRanks(HttpJson.MAPPER.createObjectNode())
                .has("notify_ranks")).isFalse();

        assertThatThrownBy(() -> new Instance(Role.DECODE, HTTP, RANKS.getFirst(), List.of(RANKS.getFirst(),
                RANKS.getFirst()))).hasMessageContaining("names one address twice");
        assertThatThrownBy(() -> new Instance(Role.DECODE, HTTP, RANKS.get(1), RANKS))
                .hasMessageContaining("must start with rank 0's notify address");
    }
}
