package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.tools.repro.ReproGeometry;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Decode's byte check, on a host buffer filled as the GPUs would. */
class ByteVerifierTest {
    private final ReproGeometry layout = new ReproGeometry(3, 4, 64);

    private MemorySegment received(Arena arena, long request) {
        MemorySegment host = arena.allocate(layout.regionBytes());
        for (int l = 0; l < layout.layers(); l++) {
            for (int b = 0; b < layout.blocks(); b++) {
                host.asSlice(layout.offset(l, b), layout.blockBytes()).fill((byte) ByteVerifier.fill(request, l, b));
            }
        }
        return host;
    }

    @Test
    void correctBytesHaveNoMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            ByteVerifier.Result r = new ByteVerifier(layout, arena).check(received(arena, 9), 9);
            assertThat(r.mismatchedBytes()).isZero();
            assertThat(r.badLayers()).isZero();
            assertThat(r.checkedBytes()).isEqualTo(layout.regionBytes());
        }
    }

    @Test
    void everyWrongByteIsCountedInItsLayer() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = received(arena, 9);
            host.set(ValueLayout.JAVA_BYTE, layout.offset(1, 2) + 5, (byte) 0);
            host.set(ValueLayout.JAVA_BYTE, layout.offset(1, 3) + 7, (byte) 0);
            ByteVerifier.Result r = new ByteVerifier(layout, arena).check(host, 9);
            assertThat(r.mismatchedBytes()).isEqualTo(2);
            assertThat(r.badLayers()).isEqualTo(1);
        }
    }

    @Test
    void aWriteIntoTheGapBetweenBlocksIsAMismatch() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = received(arena, 9);
            host.set(ValueLayout.JAVA_BYTE, layout.offset(0, 0) + layout.blockBytes(), (byte) 1);
            assertThat(new ByteVerifier(layout, arena).check(host, 9).mismatchedBytes()).isEqualTo(1);
        }
    }

    @Test
    void theLastRequestsBytesDoNotPassForThisOne() {
        try (Arena arena = Arena.ofConfined()) {
            ByteVerifier.Result r = new ByteVerifier(layout, arena).check(received(arena, 8), 9);
            assertThat(r.badLayers()).isEqualTo(layout.layers());
        }
    }

    @Test
    void fillValuesAreNeverZeroAndDifferBetweenNeighbours() {
        Set<Integer> seen = new HashSet<>();
        int sameAsNext = 0;
        for (int b = 0; b < 128; b++) {
            int v = ByteVerifier.fill(4, 10, b);
            assertThat(v).isBetween(1, 255);
            seen.add(v);
            if (v == ByteVerifier.fill(4, 10, b + 1)) {
                sameAsNext++;
            }
        }
        assertThat(seen.size()).isGreaterThan(64);
        assertThat(sameAsNext).isLessThan(4);
        assertThat(ByteVerifier.fill(4, 10, 0)).isNotEqualTo(ByteVerifier.fill(5, 10, 0));
    }
}
