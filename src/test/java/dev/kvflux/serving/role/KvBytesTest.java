package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.transfer.KvLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The stand-in model's KV bytes: what prefill's forward pass writes is what decode's check accepts, and only that. */
class KvBytesTest {
    private static final KvLayout.Rows LAYOUT = new KvLayout.Rows(3, 80, 1028);

    private static KvBytes over(MemorySegment region) {
        return new KvBytes(KvBytes.BlockIo.host(region), LAYOUT);
    }

    /** Copies {@code blocks} of every layer from {@code from} to {@code to}, as an engine's copies would. */
    private static void copy(MemorySegment from, List<Long> src, MemorySegment to, List<Long> dst) {
        for (int l = 0; l < LAYOUT.layers(); l++) {
            for (int i = 0; i < src.size(); i++) {
                MemorySegment.copy(from, LAYOUT.offset(l, src.get(i)), to, LAYOUT.offset(l, dst.get(i)),
                        LAYOUT.blockBytes());
            }
        }
    }

    /** Transfer t-1's KV written by prefill into its blocks 0 and 5, copied into decode's blocks 7 and 2. */
    private static KvBytes written(Arena arena, MemorySegment decode) {
        MemorySegment prefill = arena.allocate(LAYOUT.regionBytes());
        over(prefill).write("t-1", List.of(0L, 5L));
        copy(prefill, List.of(0L, 5L), decode, List.of(7L, 2L));
        return over(decode);
    }

    @Test
    void blocksCopiedWhereDecodeGrantedThemPassItsCheck() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment decode = arena.allocate(LAYOUT.regionBytes());
            KvBytes check = written(arena, decode);

            assertThat(check.mismatches("t-1", List.of(7L, 2L))).isZero();
            assertThat(check.check().of("t-1", List.of(7L, 2L))).isEqualTo(KvChecksum.of("t-1", 3, List.of(7L, 2L)));
            assertThat(check.checkedBytes()).isEqualTo(2L * 3 * 2 * 1028);
        }
    }

    @Test
    void runsOfRisingOrFallingBlocksMovedInOneCopyLandWhereEachBlockBelongs() {
        List<Long> rising = java.util.stream.LongStream.range(3, 73).boxed().toList();
        List<Long> falling = rising.reversed();
        List<Long> mixed = List.of(9L, 10L, 11L, 30L, 29L, 28L, 50L);
        try (Arena arena = Arena.ofConfined()) {
            for (List<Long> src : List.of(rising, falling, mixed)) {
                for (List<Long> dst : List.of(rising.subList(0, src.size()), falling.subList(0, src.size()), src)) {
                    MemorySegment prefill = arena.allocate(LAYOUT.regionBytes());
                    MemorySegment decode = arena.allocate(LAYOUT.regionBytes());
                    over(prefill).write("t-run", src);
                    copy(prefill, src, decode, dst);

                    assertThat(over(decode).mismatches("t-run", dst)).as(src + " -> " + dst).isZero();
                    long moved = java.util.stream.IntStream.range(0, dst.size())
                            .filter(i -> !dst.get(i).equals(dst.reversed().get(i))).count();
                    assertThat(over(decode).mismatches("t-run", dst.reversed())).as("every block read at another place")
                            .isEqualTo(3 * moved);
                }
            }
        }
    }

    @Test
    void blocksFilledByteByByteAsTheGpusForwardPassDoesPassTheByteCheckAndOnlyThat() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment decode = arena.allocate(LAYOUT.regionBytes());
            List<Long> blocks = List.of(4L, 5L, 6L, 40L);
            long idHash = KvChecksum.idHash("t-gpu");
            for (int l = 0; l < LAYOUT.layers(); l++) {
                for (int i = 0; i < blocks.size(); i++) {
                    decode.asSlice(LAYOUT.offset(l, blocks.get(i)), LAYOUT.blockBytes())
                            .fill((byte) KvBytes.byteOf(idHash, l, i));
                }
            }
            KvBytes bytes = new KvBytes(KvBytes.BlockIo.host(decode), LAYOUT, KvBytes.Pattern.BYTES);

            assertThat(bytes.mismatches("t-gpu", blocks)).isZero();
            assertThat(new KvBytes(KvBytes.BlockIo.host(decode), LAYOUT).mismatches("t-gpu", blocks))
                    .as("the host's word pattern is another").isEqualTo(12);
            decode.set(ValueLayout.JAVA_BYTE, LAYOUT.offset(1, 40) + 500, (byte) (KvBytes.byteOf(idHash, 1, 3) + 1));
            assertThat(bytes.mismatches("t-gpu", blocks)).isEqualTo(1);
        }
    }

    @Test
    void aLayerOnTheGpuIsReadyOnlyWhenBothTheModelsTimeAndTheGpusWorkAre() {
        dev.kvflux.bindings.EventState[] gpu = {dev.kvflux.bindings.EventState.NOT_READY};
        dev.kvflux.bindings.EventState[] model = {dev.kvflux.bindings.EventState.NOT_READY};
        dev.kvflux.bindings.LayerEvent both = GpuForward.both(() -> model[0], () -> gpu[0]);

        assertThat(both.query()).isEqualTo(dev.kvflux.bindings.EventState.NOT_READY);
        model[0] = dev.kvflux.bindings.EventState.READY;
        assertThat(both.query()).isEqualTo(dev.kvflux.bindings.EventState.NOT_READY);
        gpu[0] = dev.kvflux.bindings.EventState.READY;
        assertThat(both.query()).isEqualTo(dev.kvflux.bindings.EventState.READY);
    }

    @Test
    void theCheckReadsEveryByteAndSoSaysItMustNotRunOnTheEventLoop() {
        try (Arena arena = Arena.ofConfined()) {
            assertThat(over(arena.allocate(LAYOUT.regionBytes())).check().blocking()).isTrue();
        }
    }

    @Test
    void kvInTheWrongBlocksOfAnotherTransferUnwrittenOrWithOneByteChangedFailsTheCheck() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment decode = arena.allocate(LAYOUT.regionBytes());
            KvBytes check = written(arena, decode);

            assertThat(check.mismatches("t-1", List.of(2L, 7L))).as("swapped").isEqualTo(6);
            assertThat(check.mismatches("t-2", List.of(7L, 2L))).as("another transfer").isEqualTo(6);
            assertThat(check.mismatches("t-1", List.of(7L, 3L))).as("one block never written").isEqualTo(3);
            decode.set(ValueLayout.JAVA_BYTE, LAYOUT.offset(2, 2) + 1027, (byte) 0x55);
            assertThat(check.mismatches("t-1", List.of(7L, 2L))).as("the last byte of one block").isEqualTo(1);
            long expected = KvChecksum.of("t-1", 3, List.of(7L, 2L));
            assertThat(check.check().of("t-1", List.of(7L, 2L))).isNotEqualTo(expected).isNotZero();
            assertThat(check.mismatchedBlocks()).isEqualTo(6 + 6 + 3 + 1 + 1);
        }
    }
}
