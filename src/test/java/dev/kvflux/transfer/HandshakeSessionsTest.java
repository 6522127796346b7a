package dev.kvflux.transfer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.transfer.notify.KvRegion;
import java.net.InetSocketAddress;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Prefill's sessions into decodes, opened only from the descriptors each decode incarnation sent. */
class HandshakeSessionsTest {
    private static final KvLayout.Rows PREFILL = new KvLayout.Rows(2, 8, 64);
    private static final InetSocketAddress DECODE = InetSocketAddress.createUnresolved("10.0.0.2", 7001);

    private final SimulatedXgmiEngine prefillEngine = SimulatedXgmiEngine.create();
    private final SimulatedXgmiEngine decodeEngine = SimulatedXgmiEngine.create();
    private final HandshakeSessions sessions = HandshakeSessions.of(prefillEngine,
            prefillEngine.registerMemory(PREFILL.regionBytes(), 0), PREFILL);

    @AfterEach
    void close() {
        sessions.close();
        prefillEngine.close();
        decodeEngine.close();
    }

    /** A decode region of {@code rows} blocks per layer of {@code blockBytes}, as decode describes it. */
    private KvRegion described(int rows, long blockBytes) {
        MemoryRegion region = decodeEngine.registerMemory(2L * rows * blockBytes, 1);
        return new KvRegion(SimulatedXgmiEngine.BACKEND, decodeEngine.engineDescriptor(),
                decodeEngine.memoryDescriptor(region), rows, blockBytes);
    }

    @Test
    void nothingIsWrittenIntoADecodeIncarnationThatHasNotDescribedItsRegion() {
        sessions.described(7, described(16, 64));

        assertThatThrownBy(() -> sessions.session(DECODE, 8)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("incarnation 8").hasMessageContaining("has not described its KV region");
        assertThatThrownBy(() -> sessions.layout(DECODE, 8)).hasMessageContaining("has not described");
        assertThat(sessions.openSessions()).isZero();
        assertThat(prefillEngine.peersImported()).isZero();
    }

    @Test
    void theFirstTransferToAnIncarnationOpensItsSessionAndLaterOnesShareIt() {
        KvRegion region = described(16, 64);
        sessions.described(7, region);

        TransferSession first = sessions.session(DECODE, 7);
        TransferSession second = sessions.session(DECODE, 7);

        assertThat(second).isSameAs(first);
        assertThat(first.remote().size()).isEqualTo(2L * 16 * 64);
        assertThat(sessions.openSessions()).isEqualTo(1);
        assertThat(prefillEngine.peersImported()).isEqualTo(1);
        assertThat(sessions.layout(DECODE, 7)).isEqualTo(KvLayout.rows(2, 16, 64));
    }

    @Test
    void decodesRowsOfAnotherLengthAreAddressedByItsOwnLayout() {
        sessions.described(7, described(16, 64));
        KvLayout theirs = sessions.layout(DECODE, 7);

        var plan = PREFILL.layerPlan(1, List.of(3L), theirs, List.of(12L));

        assertThat(plan.localOffset(0)).isEqualTo((8 + 3) * 64L);
        assertThat(plan.remoteOffset(0)).isEqualTo((16 + 12) * 64L);
    }

    @Test
    void aRestartedDecodesSessionReplacesTheOldOneWhichClosesOnceItsTransfersHaveDrained() {
        sessions.described(7, described(16, 64));
        sessions.session(DECODE, 7);
        sessions.described(9, described(16, 64));

        sessions.session(DECODE, 9);

        assertThat(sessions.openSessions()).as("the old session still has a transfer writing").isEqualTo(2);
        assertThatThrownBy(() -> sessions.session(DECODE, 7)).hasMessageContaining("restarted");
        sessions.released(DECODE, 7);
        assertThat(sessions.openSessions()).isEqualTo(1);
        assertThat(prefillEngine.peersImported()).isEqualTo(1);
        assertThat(sessions.openedAndClosed()).containsExactly(2, 1);
    }

    @Test
    void aSupersededSessionNobodyUsesClosesAtOnce() {
        sessions.described(7, described(16, 64));
        sessions.session(DECODE, 7);
        sessions.released(DECODE, 7);
        sessions.described(9, described(16, 64));

        sessions.session(DECODE, 9);

        assertThat(sessions.openSessions()).isEqualTo(1);
        assertThat(prefillEngine.peersImported()).isEqualTo(1);
    }

    @Test
    void aRegionOnAnotherBackendOrWithOtherBlocksIsRefusedWithWhatToDo() {
        KvRegion other = new KvRegion("native-sim", new byte[] {1}, new byte[] {2}, 16, 64);
        sessions.described(7, other);
        sessions.described(8, described(16, 128));

        assertThatThrownBy(() -> sessions.session(DECODE, 7)).hasMessageContaining("backend 'native-sim'")
                .hasMessageContaining("same --backend");
        assertThatThrownBy(() -> sessions.session(DECODE, 8)).hasMessageContaining("128 bytes")
                .hasMessageContaining("same model");
        assertThat(sessions.openSessions()).isZero();
    }

    @Test
    void aRegionSmallerThanItsRowsSayIsRefusedAndForgotten() {
        MemoryRegion small = decodeEngine.registerMemory(64, 1);
        sessions.described(7, new KvRegion(SimulatedXgmiEngine.BACKEND, decodeEngine.engineDescriptor(),
                decodeEngine.memoryDescriptor(small), 16, 64));

        assertThatThrownBy(() -> sessions.session(DECODE, 7)).hasMessageContaining("region of only 64 bytes");
        assertThat(prefillEngine.peersImported()).isZero();
    }

    @Test
    void anIncarnationKeepsTheFirstRegionItDescribed() {
        KvRegion first = described(16, 64);
        sessions.described(7, first);
        sessions.described(7, described(32, 64));

        assertThat(sessions.layout(DECODE, 7)).isEqualTo(KvLayout.rows(2, 16, 64));
    }

    @Test
    void describedIncarnationsAreBounded() {
        KvRegion region = described(16, 64);
        for (long incarnation = 1; incarnation <= HandshakeSessions.MAX_DESCRIBED + 1; incarnation++) {
            sessions.described(incarnation, region);
        }

        assertThatThrownBy(() -> sessions.layout(DECODE, 1)).hasMessageContaining("has not described");
        assertThat(sessions.layout(DECODE, HandshakeSessions.MAX_DESCRIBED + 1)).isNotNull();
    }

    @Test
    void oneDecodeReachedAtAnotherAddressSharesItsSession() {
        sessions.described(7, described(16, 64));
        TransferSession direct = sessions.session(DECODE, 7);

        TransferSession relayed = sessions.session(InetSocketAddress.createUnresolved("10.0.0.9", 7001), 7);

        assertThat(relayed).isSameAs(direct);
        assertThat(sessions.openSessions()).isEqualTo(1);
    }

    @Test
    void aSessionNobodyWritesThroughClosesWhenIdleAndItsIncarnationsNextBlockListReopensIt() {
        long[] now = {0};
        try (HandshakeSessions idle = HandshakeSessions.of(prefillEngine,
                prefillEngine.registerMemory(PREFILL.regionBytes(), 0), PREFILL, java.time.Duration.ofSeconds(60),
                () -> now[0])) {
            idle.described(7, described(16, 64));
            idle.session(DECODE, 7);
            now[0] = java.time.Duration.ofSeconds(120).toNanos();
            assertThat(idle.openSessions()).as("still in use").isEqualTo(1);

            idle.released(DECODE, 7);
            now[0] += java.time.Duration.ofSeconds(61).toNanos();

            assertThat(idle.openSessions()).isZero();
            assertThat(prefillEngine.peersImported()).isZero();
            idle.described(7, described(16, 64));
            assertThat(idle.session(DECODE, 7)).isNotNull();
            assertThat(idle.openedAndClosed()).containsExactly(2, 1);
        }
    }

    @Test
    void closingForgetsEveryDecodesMemoryAndRefusesLaterLookups() {
        sessions.described(7, described(16, 64));
        sessions.session(DECODE, 7);

        sessions.close();

        assertThat(prefillEngine.peersImported()).isZero();
        assertThatThrownBy(() -> sessions.session(DECODE, 7)).hasMessageContaining("shutting down");
    }
}
