package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** The msgpack shapes of the notify messages. */
class NotifyCodecTest {

    @Test
    void everyMessageSurvivesARoundTrip() {
        List<NotifyMessage> messages = List.of(
                new NotifyMessage.RemoteBlocks("req-1", "t-1", List.of(3L, 4L, 9L), 0),
                new NotifyMessage.WriteDone("t-1"),
                new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, "RDMA transfer failed: qp error (code=13)"),
                new NotifyMessage.Release("t-1"));
        for (NotifyMessage message : messages) {
            assertThat(NotifyCodec.decode(NotifyCodec.encode(message))).isEqualTo(message);
        }
    }

    @Test
    void messagesHaveMoriioShape() throws Exception {
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.WriteDone("t-9"))))
                .containsExactly(Map.entry("type", "write_done"), Map.entry("transfer_id", "t-9"));
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.RemoteBlocks("req-1", "t-1", List.of(3L, 4L), 0))))
                .containsExactly(Map.entry("type", "remote_blocks"), Map.entry("req_id", "req-1"),
                        Map.entry("transfer_id", "t-1"), Map.entry("block_notify_list", "[3,4]"),
                        Map.entry("decode_rank", "0"));
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.WriteFailed("t-2", StatusCode.IN_PROGRESS, "timed out"))))
                .containsExactly(Map.entry("type", "write_failed"), Map.entry("transfer_id", "t-2"),
                        Map.entry("code", "2"), Map.entry("reason", "timed out"));
    }

    @Test
    void kvfluxKeysTravelOnlyWhenSetAndAbortSurvivesARoundTrip() throws Exception {
        List<NotifyMessage> messages = List.of(
                new NotifyMessage.RemoteBlocks("req-1", "t-1", List.of(3L), 0, 77),
                new NotifyMessage.WriteDone("t-1", 5, 77, -123456789L),
                new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, "qp error", 5, 77),
                new NotifyMessage.Release("t-1", 5, 77),
                new NotifyMessage.Abort("t-1", "the client went away", 77),
                new NotifyMessage.Abort("t-1", "the client went away"));
        for (NotifyMessage message : messages) {
            assertThat(NotifyCodec.decode(NotifyCodec.encode(message))).isEqualTo(message);
        }
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.WriteDone("t-9", 5, 77, 9))))
                .containsExactly(Map.entry("type", "write_done"), Map.entry("transfer_id", "t-9"),
                        Map.entry("incarnation", "5"), Map.entry("to_incarnation", "77"), Map.entry("checksum", "9"));
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.Release("t-9", 0, 77))))
                .containsExactly(Map.entry("type", "release"), Map.entry("transfer_id", "t-9"),
                        Map.entry("to_incarnation", "77"));
    }

    @Test
    void aDecodesKvRegionTravelsWithItsBlockListAsBinariesAndIntegers() throws Exception {
        byte[] engine = {(byte) 0x96, 1, 2, 3};
        byte[] memory = new byte[200];
        java.util.Arrays.fill(memory, (byte) 0xc1);
        KvRegion region = new KvRegion("native-sim", engine, memory, 4096, 73_728);
        NotifyMessage.RemoteBlocks blocks = new NotifyMessage.RemoteBlocks("t-1", "t-1", List.of(3L, 4L), 0, 77, region);

        byte[] frame = NotifyCodec.encode(blocks);

        NotifyMessage.RemoteBlocks back = (NotifyMessage.RemoteBlocks) NotifyCodec.decode(frame);
        assertThat(back).isEqualTo(blocks);
        assertThat(back.region().memoryDescriptor()).isEqualTo(memory);
        assertThat(keys(frame)).containsEntry("kv_backend", "native-sim").containsEntry("kv_row_blocks", "4096")
                .containsEntry("kv_block_bytes", "73728").containsKeys("kv_engine_desc", "kv_memory_desc");
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.RemoteBlocks("t-1", "t-1", List.of(3L), 0, 77))))
                .as("a block list without a region is MoRIIO's, plus the incarnation")
                .doesNotContainKeys("kv_backend", "kv_engine_desc", "kv_memory_desc");
    }

    @Test
    void readModesReadReadyCarriesPrefillsBlocksRegionAndCheckAndReleaseItsConsumersTpSize() throws Exception {
        KvRegion region = new KvRegion("sim-xgmi", new byte[] {1, 2}, new byte[] {3}, 512, 4096);
        NotifyMessage.ReadReady ready = new NotifyMessage.ReadReady("t-2", List.of(40L, 41L, 7L), 11, 22, 0xfeedL,
                region);

        byte[] frame = NotifyCodec.encode(ready);

        assertThat(NotifyCodec.decode(frame)).isEqualTo(ready);
        assertThat(keys(frame)).containsEntry("type", "read_ready").containsEntry("block_notify_list", "[40,41,7]")
                .containsEntry("to_incarnation", "22").containsEntry("checksum", String.valueOf(0xfeedL))
                .containsEntry("kv_backend", "sim-xgmi");
        NotifyMessage.Release release = new NotifyMessage.Release("t-2", 22, 11, 4);
        byte[] ack = NotifyCodec.encode(release);
        assertThat(NotifyCodec.decode(ack)).isEqualTo(release);
        assertThat(keys(ack)).containsEntry("consumer_tp_size", "4");
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.Release("t-2", 22, 11))))
                .as("a release that does not say its TP size is MoRIIO's, plus incarnations")
                .doesNotContainKey("consumer_tp_size");
    }

    @Test
    void aConsumerTpSizeOutOfRangeIsAMalformedFrame() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(3).packString("type").packString("release").packString("transfer_id").packString("t")
                    .packString("consumer_tp_size").packLong(1L << 32);
            byte[] frame = packer.toByteArray();
            assertThatThrownBy(() -> NotifyCodec.decode(frame)).isInstanceOf(MalformedFrameException.class)
                    .hasMessageContaining("consumer_tp_size");
        }
    }

    /** A remote_blocks whose region's engine descriptor is one byte over the limit, with or without kv_block_bytes. */
    private static byte[] regionFrame(boolean withBlockBytes) throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(withBlockBytes ? 10 : 9).packString("type").packString("remote_blocks")
                    .packString("req_id").packString("r").packString("transfer_id").packString("t")
                    .packString("block_notify_list").packArrayHeader(0).packString("decode_rank").packInt(0)
                    .packString("kv_backend").packString("native-sim")
                    .packString("kv_engine_desc").packBinaryHeader(KvRegion.MAX_DESCRIPTOR_BYTES + 1)
                    .writePayload(new byte[KvRegion.MAX_DESCRIPTOR_BYTES + 1])
                    .packString("kv_memory_desc").packBinaryHeader(1).writePayload(new byte[1])
                    .packString("kv_row_blocks").packInt(8);
            if (withBlockBytes) {
                packer.packString("kv_block_bytes").packInt(64);
            }
            return packer.toByteArray();
        }
    }

    @Test
    void aKvRegionWithADescriptorOverItsLimitOrMissingKeysIsAMalformedFrame() throws Exception {
        assertThatThrownBy(() -> NotifyCodec.decode(regionFrame(false))).isInstanceOf(MalformedFrameException.class)
                .hasMessageContaining("kv_block_bytes");
        assertThatThrownBy(() -> NotifyCodec.decode(regionFrame(true))).isInstanceOf(MalformedFrameException.class)
                .hasMessageContaining("kv_engine_desc").hasMessageContaining("over its limit of 4096");
    }

    @Test
    void anIncarnationThatIsNotAnIntegerIsAMalformedFrame() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(3).packString("type").packString("write_done")
                    .packString("transfer_id").packString("t-9").packString("incarnation").packString("x");
            assertThatThrownBy(() -> NotifyCodec.decode(packer.toByteArray()))
                    .isInstanceOf(MalformedFrameException.class).hasMessageContaining("incarnation");
        }
    }

    private static final String TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    @Test
    void aTraceparentTravelsOnOutcomesOnlyWhenSet() throws Exception {
        List<NotifyMessage> messages = List.of(
                new NotifyMessage.WriteDone("t-1", 5, 77, 9, TRACEPARENT),
                new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP, "qp error", 5, 77, TRACEPARENT));
        for (NotifyMessage message : messages) {
            assertThat(NotifyCodec.decode(NotifyCodec.encode(message))).isEqualTo(message);
        }
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.WriteDone("t-9").withTraceparent(TRACEPARENT))))
                .containsExactly(Map.entry("type", "write_done"), Map.entry("transfer_id", "t-9"),
                        Map.entry("traceparent", TRACEPARENT));
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.Release("t-9").withTraceparent(TRACEPARENT))))
                .as("only outcomes carry one").doesNotContainKey("traceparent");
        assertThat(keys(NotifyCodec.encode(new NotifyMessage.WriteDone("t-9")))).doesNotContainKey("traceparent");
    }

    /** A write_done whose traceparent key holds {@code value}, packed as a string. */
    private static byte[] writeDoneWithTraceparent(String value) throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(3).packString("type").packString("write_done")
                    .packString("transfer_id").packString("t-9").packString("traceparent").packString(value);
            return packer.toByteArray();
        }
    }

    @Test
    void aTraceparentOfTheWrongFormReadsAsAbsent() throws Exception {
        for (String wrong : List.of("", "not a traceparent", TRACEPARENT.toUpperCase(),
                "01" + TRACEPARENT.substring(2), "ff" + TRACEPARENT.substring(2), TRACEPARENT + "-extra",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                TRACEPARENT.replace('-', '_'), TRACEPARENT.substring(0, 54) + "g", "x".repeat(256))) {
            assertThat(NotifyCodec.decode(writeDoneWithTraceparent(wrong))).as(wrong)
                    .isEqualTo(new NotifyMessage.WriteDone("t-9"));
        }
    }

    @Test
    void aTraceparentOverItsByteLimitOrNotAStringIsAMalformedFrame() throws Exception {
        assertThatThrownBy(() -> NotifyCodec.decode(writeDoneWithTraceparent("0".repeat(Traceparent.MAX_BYTES + 1))))
                .isInstanceOf(MalformedFrameException.class).hasMessageContaining("traceparent")
                .hasMessageContaining("over its limit of 256");
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(3).packString("type").packString("write_done")
                    .packString("transfer_id").packString("t-9").packString("traceparent").packInt(55);
            assertThatThrownBy(() -> NotifyCodec.decode(packer.toByteArray()))
                    .isInstanceOf(MalformedFrameException.class).hasMessageContaining("traceparent");
        }
    }

    /** The msgpack map's keys in order, each with its value as text. */
    private static Map<String, String> keys(byte[] bytes) throws Exception {
        Map<String, String> keys = new java.util.LinkedHashMap<>();
        try (var unpacker = MessagePack.newDefaultUnpacker(bytes)) {
            unpacker.unpackValue().asMapValue().entrySet().forEach(e -> keys.put(e.getKey().asStringValue().asString(),
                    e.getValue().isStringValue() ? e.getValue().asStringValue().asString() : e.getValue().toJson()));
        }
        return keys;
    }

    @Test
    void unknownKeysAreIgnored() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(3).packString("type").packString("write_done")
                    .packString("transfer_id").packString("t-9").packString("extra").packInt(1);
            assertThat(NotifyCodec.decode(packer.toByteArray())).isEqualTo(new NotifyMessage.WriteDone("t-9"));
        }
    }

    @Test
    void unknownTypeIsMalformedAndNamed() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(2).packString("type").packString("write_maybe")
                    .packString("transfer_id").packString("t-9");
            assertThatThrownBy(() -> NotifyCodec.decode(packer.toByteArray()))
                    .isInstanceOf(MalformedFrameException.class).hasMessageContaining("write_maybe");
        }
    }

    @Test
    void writeFailedWithSuccessCodeIsMalformed() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(4).packString("type").packString("write_failed")
                    .packString("transfer_id").packString("t-9").packString("code").packInt(0)
                    .packString("reason").packString("?");
            assertThatThrownBy(() -> NotifyCodec.decode(packer.toByteArray()))
                    .isInstanceOf(MalformedFrameException.class).hasMessageContaining("not a failure");
        }
    }

    @Test
    void decodeRankAboveIntRangeIsMalformedAndNamed() throws Exception {
        assertThatThrownBy(() -> NotifyCodec.decode(remoteBlocksWithRank(1L << 32 | 1)))
                .isInstanceOf(MalformedFrameException.class).hasMessageContaining("decode_rank")
                .hasMessageContaining(Long.toString(1L << 32 | 1));
    }

    @Test
    void negativeDecodeRankIsMalformedAndNamed() throws Exception {
        assertThatThrownBy(() -> NotifyCodec.decode(remoteBlocksWithRank(-1)))
                .isInstanceOf(MalformedFrameException.class).hasMessageContaining("decode_rank")
                .hasMessageContaining("-1");
    }

    @Test
    void writeFailedCodeAboveIntRangeIsMalformedNotWrapped() throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(4).packString("type").packString("write_failed")
                    .packString("transfer_id").packString("t-9").packString("code").packLong((1L << 32) + 13)
                    .packString("reason").packString("?");
            assertThatThrownBy(() -> NotifyCodec.decode(packer.toByteArray()))
                    .isInstanceOf(MalformedFrameException.class).hasMessageContaining("'code'");
        }
    }

    /** A remote_blocks payload with {@code rank} as its decode_rank, which may be out of int range. */
    static byte[] remoteBlocksWithRank(long rank) throws Exception {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(5).packString("type").packString("remote_blocks")
                    .packString("req_id").packString("req-1").packString("transfer_id").packString("t-1")
                    .packString("block_notify_list").packArrayHeader(1).packLong(3)
                    .packString("decode_rank").packLong(rank);
            return packer.toByteArray();
        }
    }
}
