package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** Frames built to hurt the decoder: each is rejected before anything its headers claim is allocated. */
class HostileFrameTest {
    /** More than the decoder's own bookkeeping needs, far less than any claimed size below. */
    private static final long SMALL = 64 * 1024;

    private static byte[] bytes(int... values) {
        byte[] out = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = (byte) values[i];
        }
        return out;
    }

    private static void assertRejectedCheaply(byte[] frame, String messagePart) {
        assertThatThrownBy(() -> NotifyCodec.decode(frame)).isInstanceOf(MalformedFrameException.class)
                .hasMessageContaining(messagePart);
        assertThat(Allocation.during(() -> NotifyCodec.decode(frame))).isLessThan(SMALL);
    }

    @Test
    void nineByteMap32ClaimingAGigaEntriesIsRejectedWithoutAllocatingThem() {
        assertRejectedCheaply(bytes(0xdf, 0x40, 0, 0, 0, 0xa1, 'a', 0xa1, 'b'), "keys");
    }

    @Test
    void nineByteStr32KeyClaimingAGigabyteIsRejectedWithoutAllocatingIt() {
        assertRejectedCheaply(bytes(0x81, 0xdb, 0x40, 0, 0, 0, 'a', 'b', 'c'), "bytes");
    }

    @Test
    void array32ValueClaimingAGigaElementsIsRejectedWithoutAllocatingThem() {
        assertRejectedCheaply(bytes(0x81, 0xa4, 't', 'y', 'p', 'e', 0xdd, 0x40, 0, 0, 0, 1), "elements");
    }

    @Test
    void bin32ValueClaimingAGigabyteIsRejectedWithoutAllocatingIt() {
        assertRejectedCheaply(bytes(0x81, 0xa4, 't', 'y', 'p', 'e', 0xc6, 0x40, 0, 0, 0, 1), "bytes");
    }

    @Test
    void str16AndMap16LengthsBeyondTheFrameAreRejected() {
        assertRejectedCheaply(bytes(0x81, 0xa4, 't', 'y', 'p', 'e', 0xda, 0xff, 0xff, 'x'), "bytes");
        assertRejectedCheaply(bytes(0xde, 0xff, 0xff, 0xa1, 'a'), "keys");
    }

    @Test
    void deepNestingIsRejectedAtOnceWithoutRecursion() {
        byte[] frame = new byte[100_001];
        frame[0] = (byte) 0x81;
        Arrays.fill(frame, 1, frame.length - 1, (byte) 0x91);
        frame[frame.length - 1] = (byte) 0xc0;
        // the key position holds an array: rejected at the first level
        assertRejectedCheaply(frame, "scalar");
        byte[] valueNesting = ByteBuffer.allocate(100_006).put(bytes(0x81, 0xa4, 't', 'y', 'p', 'e')).array();
        Arrays.fill(valueNesting, 6, valueNesting.length, (byte) 0x91);
        assertRejectedCheaply(valueNesting, "nesting");
    }

    @Test
    void nestedMapExtensionTypeAndRepeatedKeyAreRejected() throws Exception {
        assertRejectedCheaply(bytes(0x81, 0xa1, 'x', 0x80), "nesting");
        assertRejectedCheaply(bytes(0x81, 0xa1, 'x', 0xd4, 1, 2), "extension");
        byte[] repeated = map(p -> p.packMapHeader(3).packString("type").packString("write_done")
                .packString("transfer_id").packString("t-1").packString("transfer_id").packString("t-2"));
        assertRejectedCheaply(repeated, "repeats");
    }

    @Test
    void newlineInTheTypeIsEscapedInTheRejection() throws Exception {
        byte[] frame = map(p -> p.packMapHeader(2).packString("type")
                .packString("write_maybe\n12:00:00.000 ERROR forged line").packString("transfer_id").packString("t"));
        assertThatThrownBy(() -> NotifyCodec.decode(frame)).isInstanceOf(MalformedFrameException.class)
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }

    @Test
    void invalidUtf8IsRejectedAsSuch() {
        // "type": "write_done", "transfer_id": 0xC0 0xAF (an overlong '/')
        byte[] frame = bytes(0x82, 0xa4, 't', 'y', 'p', 'e', 0xaa, 'w', 'r', 'i', 't', 'e', '_', 'd', 'o', 'n', 'e',
                0xab, 't', 'r', 'a', 'n', 's', 'f', 'e', 'r', '_', 'i', 'd', 0xa2, 0xc0, 0xaf);
        assertThatThrownBy(() -> NotifyCodec.decode(frame)).isInstanceOfSatisfying(MalformedFrameException.class,
                e -> assertThat(e.isInvalidUtf8()).isTrue());
        for (int[] bad : List.of(new int[] {0xed, 0xa0, 0x80}, new int[] {0xf4, 0x90, 0x80, 0x80},
                new int[] {0xe2, 0x82}, new int[] {0x80}, new int[] {0xff})) {
            assertThat(Utf8.isValid(bytes(bad), 0, bad.length)).as(Arrays.toString(bad)).isFalse();
        }
        byte[] good = "kvflux ✓ 𝄞".getBytes(StandardCharsets.UTF_8);
        assertThat(Utf8.isValid(good, 0, good.length)).isTrue();
    }

    @Test
    void idsLongerThanTheirLimitAreRejected() {
        String id = "t".repeat(NotifyCodec.MAX_ID_BYTES + 1);
        assertRejectedCheaply(NotifyCodec.encode(new NotifyMessage.WriteDone(id)), "limit");
        assertThat(NotifyCodec.decode(NotifyCodec.encode(new NotifyMessage.WriteDone(id.substring(1)))).transferId())
                .hasSize(NotifyCodec.MAX_ID_BYTES);
    }

    @Test
    void blockListsLongerThanTheirLimitAreRejected() {
        List<Long> blocks = LongStream.range(0, NotifyCodec.MAX_BLOCKS + 1).boxed().toList();
        assertRejectedCheaply(NotifyCodec.encode(new NotifyMessage.RemoteBlocks("r", "t", blocks, 0)), "limit");
        assertThat(((NotifyMessage.RemoteBlocks) NotifyCodec.decode(NotifyCodec.encode(
                new NotifyMessage.RemoteBlocks("r", "t", blocks.subList(1, blocks.size()), 0)))).blockNotifyList())
                .hasSize(NotifyCodec.MAX_BLOCKS);
    }

    @Test
    void longReasonIsCutToItsLimitAtACharacterBoundary() {
        String reason = "é".repeat(600_000);
        byte[] frame = NotifyCodec.encode(new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, reason));
        NotifyMessage.WriteFailed failed = (NotifyMessage.WriteFailed) NotifyCodec.decode(frame);
        assertThat(failed.reason()).startsWith("é".repeat(NotifyCodec.MAX_REASON_BYTES / 2))
                .contains("more bytes cut").hasSizeLessThan(NotifyCodec.MAX_REASON_BYTES + 64);
    }

    @Test
    void scalarsOfUnknownKeysAreSkippedButKnownKeysMustHaveTheirType() throws Exception {
        byte[] frame = map(p -> p.packMapHeader(4).packString("type").packString("write_done")
                .packString("transfer_id").packString("t-9").packString("extra").packArrayHeader(2).packDouble(1.5)
                .packNil().packString("flag").packBoolean(true));
        assertThat(NotifyCodec.decode(frame)).isEqualTo(new NotifyMessage.WriteDone("t-9"));
        byte[] wrong = map(p -> p.packMapHeader(2).packString("type").packString("write_done")
                .packString("transfer_id").packLong(7));
        assertRejectedCheaply(wrong, "expected a string");
    }

    @Test
    void messageOfATypeTheServerDoesNotTakeIsRejectedBeforeItsBlocksAreRead() {
        List<Long> blocks = LongStream.range(Long.MAX_VALUE - NotifyCodec.MAX_BLOCKS, Long.MAX_VALUE).boxed().toList();
        byte[] frame = NotifyCodec.encode(new NotifyMessage.RemoteBlocks("r", "t", blocks, 0));
        java.util.Set<NotifyMessage.Type> decodeTakes = java.util.Set.of(NotifyMessage.Type.WRITE_DONE,
                NotifyMessage.Type.WRITE_FAILED, NotifyMessage.Type.RELEASE);

        assertThatThrownBy(() -> NotifyCodec.decode(ByteBuffer.wrap(frame), 0, frame.length, decodeTakes))
                .isInstanceOf(MalformedFrameException.class).hasMessageContaining("not one this server takes");
        assertThat(Allocation.during(() -> NotifyCodec.decode(ByteBuffer.wrap(frame), 0, frame.length, decodeTakes)))
                .isLessThan(SMALL);
        assertThat(NotifyCodec.decode(ByteBuffer.wrap(frame), 0, frame.length, java.util.Set.of(NotifyMessage.Type.REMOTE_BLOCKS)))
                .isInstanceOf(NotifyMessage.RemoteBlocks.class);
    }

    private interface Packing {
        void pack(MessageBufferPacker packer) throws Exception;
    }

    private static byte[] map(Packing packing) throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packing.pack(packer);
            return packer.toByteArray();
        }
    }
}
