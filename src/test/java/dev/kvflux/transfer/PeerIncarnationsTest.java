package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetSocketAddress;
import org.junit.jupiter.api.Test;

/** The one rule both sides apply to a peer's incarnation. */
class PeerIncarnationsTest {
    private static final InetSocketAddress PEER = InetSocketAddress.createUnresolved("10.0.0.7", 11357);
    private static final InetSocketAddress OTHER = InetSocketAddress.createUnresolved("10.0.0.8", 11357);

    @Test
    void theFirstIncarnationAndItsRepeatsAreCurrent() {
        PeerIncarnations peers = new PeerIncarnations();
        assertThat(peers.observe(PEER, 5)).isEqualTo(new PeerIncarnations.Seen(PeerIncarnations.Verdict.CURRENT, 0));
        assertThat(peers.observe(PEER, 5)).isEqualTo(new PeerIncarnations.Seen(PeerIncarnations.Verdict.CURRENT, 5));
        assertThat(peers.newest(PEER)).isEqualTo(5);
    }

    @Test
    void aNewerIncarnationIsARestartNamingThePreviousOneAndAnOlderOneIsStale() {
        PeerIncarnations peers = new PeerIncarnations();
        peers.observe(PEER, 5);
        assertThat(peers.observe(PEER, 9)).isEqualTo(new PeerIncarnations.Seen(PeerIncarnations.Verdict.RESTARTED, 5));
        assertThat(peers.observe(PEER, 5)).isEqualTo(new PeerIncarnations.Seen(PeerIncarnations.Verdict.STALE, 9));
        assertThat(peers.newest(PEER)).as("a stale message changes nothing").isEqualTo(9);
    }

    @Test
    void peersAreTrackedApartAndPastTheBoundANewPeerIsUntracked() {
        PeerIncarnations peers = new PeerIncarnations(1);
        peers.observe(PEER, 5);
        assertThat(peers.observe(OTHER, 3).verdict()).isEqualTo(PeerIncarnations.Verdict.UNTRACKED);
        assertThat(peers.newest(OTHER)).isZero();
        assertThat(peers.observe(PEER, 6).verdict()).as("tracked peers keep their rule")
                .isEqualTo(PeerIncarnations.Verdict.RESTARTED);
    }

    @Test
    void incarnationZeroMeansUnknownAndIsNotObserved() {
        assertThatThrownBy(() -> new PeerIncarnations().observe(PEER, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("unknown");
    }
}
