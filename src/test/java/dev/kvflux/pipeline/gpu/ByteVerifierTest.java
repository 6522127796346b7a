package dev.kvflux.pipeline.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** Decode's byte check, on a host buffer filled as the GPUs would. */
class ByteVerifierTest {
    private final SeedLayout layout = new SeedLayout(3, 4, 64);

    private MemorySegment received(Arena arena, long request) {
        MemorySegment host = arena.allocate(layout.bufferBytes());
        for (int l = 0; l < layout.layers(); l++) {
            for (int b = 0; b < layout.blocks(); b++) {
                host.asSlice(layout.offset(l, b), layout.blockBytes()).fill((byte) SeedLayout.fill(request, l, b));
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
            assertThat(r.checkedBytes()).isEqualTo(layout.bufferBytes());
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
}
