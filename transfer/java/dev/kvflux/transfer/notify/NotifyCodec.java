package dev.kvflux.transfer.notify;

import dev.kvflux.bindings.StatusCode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * msgpack encoding of {@link NotifyMessage}s: one map per message with string keys, as MoRIIO sends them
 * ({@code type}, {@code transfer_id}, {@code req_id}, {@code block_notify_list}, {@code decode_rank}),
 * for {@code write_failed} the status {@code code} as MoRI's number and the {@code reason} text, and for
 * kvflux's {@code abort} the {@code reason}.
 * kvflux peers add {@code incarnation}, {@code to_incarnation} and {@code checksum} when not 0
 * ({@link NotifyMessage}); absent, they read as 0. Outcomes may add {@code traceparent}, a string of at most
 * {@value Traceparent#MAX_BYTES} bytes (a longer one, or one that is not a string, makes the frame malformed);
 * one that is not a valid version-00 {@link Traceparent} reads as absent. Unknown keys with scalar values are
 * ignored, so newer senders stay readable. A kvflux decode's {@code remote_blocks} adds its {@link KvRegion} as
 * {@code kv_backend}, {@code kv_engine_desc} and {@code kv_memory_desc} (binaries), {@code kv_row_blocks} and
 * {@code kv_block_bytes}; a kvflux prefill's {@code read_ready} (READ mode) carries its own blocks in
 * {@code block_notify_list}, its region the same way, and {@code checksum}; decode's {@code release} to it adds
 * {@code consumer_tp_size} when not 0.
 *
 * <p>Decoding is bounded before anything is allocated: {@link FlatMapReader} checks the frame's structure
 * and every length against the bytes present, then each field is checked against its own limit
 * ({@value #MAX_ID_BYTES} bytes for ids, {@value #MAX_BLOCKS} blocks) before it becomes a string or a list.
 * A {@code reason} longer than {@value #MAX_REASON_BYTES} bytes is cut to that, with a note of what was cut.
 */
public final class NotifyCodec {
    /** Longest {@code transfer_id} or {@code req_id}, in UTF-8 bytes. */
    public static final int MAX_ID_BYTES = 256;
    /** Most blocks in one {@code block_notify_list}. */
    public static final int MAX_BLOCKS = 65_536;
    /** Longest {@code reason} kept, in UTF-8 bytes; a longer one is cut. */
    public static final int MAX_REASON_BYTES = 1024;
    /** How many keys a {@code remote_blocks}'s KV region adds ({@code kv_backend}, {@code kv_engine_desc},
     * {@code kv_memory_desc}, {@code kv_row_blocks}, {@code kv_block_bytes}). */
    private static final int REGION_KEYS = 5;
    /** The largest {@code consumer_tp_size} a {@code release} may carry. */
    public static final int MAX_TP_SIZE = 1024;
    /** Longest {@code type} accepted, in UTF-8 bytes. */
    private static final int MAX_TYPE_BYTES = 32;

    private NotifyCodec() {
    }

    /** The message's msgpack bytes. */
    public static byte[] encode(NotifyMessage message) {
        List<Map.Entry<String, Long>> optional = optionalKeys(message);
        int extra = optional.size() + (message.traceparent() != null ? 1 : 0);
        FlatMapWriter packer = new FlatMapWriter();
        switch (message) {
            case NotifyMessage.RemoteBlocks blocks -> {
                KvRegion region = blocks.region();
                packer.map(5 + extra + (region == null ? 0 : REGION_KEYS))
                        .entry("type", blocks.type().wireName()).entry("req_id", blocks.reqId())
                        .entry("transfer_id", blocks.transferId())
                        .string("block_notify_list").array(blocks.blockNotifyList().size());
                for (long block : blocks.blockNotifyList()) {
                    packer.integer(block);
                }
                packer.entry("decode_rank", blocks.decodeRank());
                region(packer, region);
            }
            case NotifyMessage.WriteFailed failed -> packer.map(4 + extra).entry("type", failed.type().wireName())
                    .entry("transfer_id", failed.transferId()).entry("code", failed.code().value())
                    .entry("reason", failed.reason());
            case NotifyMessage.Abort abort -> packer.map(3 + extra).entry("type", abort.type().wireName())
                    .entry("transfer_id", abort.transferId()).entry("reason", abort.reason());
            case NotifyMessage.ReadReady ready -> {
                KvRegion region = ready.region();
                packer.map(3 + extra + (region == null ? 0 : REGION_KEYS))
                        .entry("type", ready.type().wireName()).entry("transfer_id", ready.transferId())
                        .string("block_notify_list").array(ready.blockNotifyList().size());
                for (long block : ready.blockNotifyList()) {
                    packer.integer(block);
                }
                region(packer, region);
            }
            case NotifyMessage.WriteDone done -> typeAndId(packer, done, extra);
            case NotifyMessage.Release release -> typeAndId(packer, release, extra);
        }
        for (Map.Entry<String, Long> key : optional) {
            packer.entry(key.getKey(), key.getValue());
        }
        if (message.traceparent() != null) {
            packer.entry("traceparent", message.traceparent());
        }
        return packer.toByteArray();
    }

    /**
     * The message in {@code bytes}.
     *
     * @throws MalformedFrameException saying what was wrong, if the bytes are not one message map
     */
    public static NotifyMessage decode(byte[] bytes) {
        return decode(ByteBuffer.wrap(bytes));
    }

    /**
     * The message in {@code payload} from its position to its limit, read in place (the buffer is not moved
     * and its bytes are not copied, only each string field's); see {@link #decode(byte[])}.
     */
    static NotifyMessage decode(ByteBuffer payload) {
        return decode(payload, payload.position(), payload.remaining());
    }

    /** The message at absolute positions {@code [offset, offset + length)} of {@code bytes}. */
    static NotifyMessage decode(ByteBuffer bytes, int offset, int length) {
        return decode(bytes, offset, length, null);
    }

    /**
     * The message at absolute positions {@code [offset, offset + length)} of {@code bytes}, which must be of one
     * of the {@code accepted} types (all when null); any other type is rejected before the rest of the message is
     * read, so a role never materialises what it would ignore.
     */
    static NotifyMessage decode(ByteBuffer bytes, int offset, int length, Set<NotifyMessage.Type> accepted) {
        FlatMapReader.Fields fields = FlatMapReader.read(bytes, offset, length);
        String wire = fields.string("type", MAX_TYPE_BYTES);
        NotifyMessage.Type type = NotifyMessage.Type.ofWire(wire);
        if (type == null) {
            throw new MalformedFrameException("unknown notify message type '" + LogText.escape(wire)
                    + "'; expected remote_blocks, write_done, write_failed, release, abort or read_ready");
        }
        if (accepted != null && !accepted.contains(type)) {
            throw new MalformedFrameException("a notify message of type '" + type + "' is not one this server takes ("
                    + accepted.stream().sorted().map(NotifyMessage.Type::wireName)
                            .collect(Collectors.joining(", ")) + ")");
        }
        return message(type, fields);
    }

    /** The kvflux-only keys of a message that are not 0, in a fixed order. */
    private static List<Map.Entry<String, Long>> optionalKeys(NotifyMessage message) {
        List<Map.Entry<String, Long>> keys = new ArrayList<>(4);
        long to = switch (message) {
            case NotifyMessage.WriteDone done -> done.toIncarnation();
            case NotifyMessage.WriteFailed failed -> failed.toIncarnation();
            case NotifyMessage.Release release -> release.toIncarnation();
            case NotifyMessage.ReadReady ready -> ready.toIncarnation();
            default -> 0;
        };
        long checksum = switch (message) {
            case NotifyMessage.WriteDone done -> done.checksum();
            case NotifyMessage.ReadReady ready -> ready.checksum();
            default -> 0;
        };
        long tp = message instanceof NotifyMessage.Release release ? release.consumerTpSize() : 0;
        for (Map.Entry<String, Long> key : List.of(Map.entry("incarnation", message.incarnation()),
                Map.entry("to_incarnation", to), Map.entry("checksum", checksum), Map.entry("consumer_tp_size", tp))) {
            if (key.getValue() != 0) {
                keys.add(key);
            }
        }
        return keys;
    }

    /** An optional integer key; 0 when absent. */
    private static long optionalLong(FlatMapReader.Fields fields, String key) {
        return fields.get(key) == null ? 0 : fields.integer(key);
    }

    /**
     * The optional {@code traceparent}: null when absent or not a valid version-00 traceparent; checked against
     * {@value Traceparent#MAX_BYTES} bytes before it becomes a string.
     */
    private static String traceparent(FlatMapReader.Fields fields) {
        return fields.get("traceparent") == null ? null
                : Traceparent.orNull(fields.string("traceparent", Traceparent.MAX_BYTES));
    }

    /** The record a message map's fields make; each field is checked against its limit before it is read. */
    private static NotifyMessage message(NotifyMessage.Type type, FlatMapReader.Fields fields) {
        String transferId = fields.string("transfer_id", MAX_ID_BYTES);
        long incarnation = optionalLong(fields, "incarnation");
        long to = optionalLong(fields, "to_incarnation");
        return switch (type) {
            case WRITE_DONE -> new NotifyMessage.WriteDone(transferId, incarnation, to,
                    optionalLong(fields, "checksum"), traceparent(fields));
            case RELEASE -> new NotifyMessage.Release(transferId, incarnation, to,
                    fields.get("consumer_tp_size") == null ? 0 : intIn(fields, "consumer_tp_size", 0, MAX_TP_SIZE));
            case READ_READY -> new NotifyMessage.ReadReady(transferId, fields.integers("block_notify_list", MAX_BLOCKS),
                    incarnation, to, optionalLong(fields, "checksum"), region(fields));
            case ABORT -> new NotifyMessage.Abort(transferId, fields.truncatedString("reason", MAX_REASON_BYTES),
                    incarnation);
            case WRITE_FAILED -> new NotifyMessage.WriteFailed(transferId, code(fields),
                    fields.truncatedString("reason", MAX_REASON_BYTES), incarnation, to, traceparent(fields));
            case REMOTE_BLOCKS -> new NotifyMessage.RemoteBlocks(fields.string("req_id", MAX_ID_BYTES), transferId,
                    fields.integers("block_notify_list", MAX_BLOCKS), intIn(fields, "decode_rank", 0, Integer.MAX_VALUE),
                    incarnation, region(fields));
        };
    }

    /**
     * The optional KV region of a {@code remote_blocks}: all five {@code kv_*} keys or none; each descriptor checked
     * against {@link KvRegion#MAX_DESCRIPTOR_BYTES} before it is copied.
     */
    private static KvRegion region(FlatMapReader.Fields fields) {
        if (fields.get("kv_memory_desc") == null && fields.get("kv_engine_desc") == null) {
            return null;
        }
        long rows = fields.integer("kv_row_blocks");
        long blockBytes = fields.integer("kv_block_bytes");
        if (rows < 1 || rows > Integer.MAX_VALUE || blockBytes < 1 || blockBytes > Integer.MAX_VALUE) {
            throw new MalformedFrameException("the message carries a KV region of " + rows + " blocks per row of "
                    + blockBytes + " bytes; each must lie in 1.." + Integer.MAX_VALUE);
        }
        return new KvRegion(fields.string("kv_backend", KvRegion.MAX_BACKEND_BYTES),
                fields.binary("kv_engine_desc", KvRegion.MAX_DESCRIPTOR_BYTES),
                fields.binary("kv_memory_desc", KvRegion.MAX_DESCRIPTOR_BYTES), rows, blockBytes);
    }

    /**
     * The transport acknowledgement a server sends back for each message it accepted:
     * {@code {"type": "ack", "transfer_id": ...}}. It is not a MoRIIO message; only kvflux peers see it.
     */
    static byte[] encodeAck(String transferId) {
        return new FlatMapWriter().map(2).entry("type", "ack").entry("transfer_id", transferId).toByteArray();
    }

    /** The transfer id an acknowledgement names. */
    static String decodeAck(byte[] bytes) {
        FlatMapReader.Fields fields = FlatMapReader.read(bytes, 0, bytes.length);
        String type = fields.string("type", MAX_TYPE_BYTES);
        if (!type.equals("ack")) {
            throw new MalformedFrameException("expected an ack from the notify server, got '" + LogText.escape(type)
                    + "'");
        }
        return fields.string("transfer_id", MAX_ID_BYTES);
    }

    private static void region(FlatMapWriter packer, KvRegion region) {
        if (region != null) {
            packer.entry("kv_backend", region.backend()).entry("kv_engine_desc", region.engineDescriptor())
                    .entry("kv_memory_desc", region.memoryDescriptor())
                    .entry("kv_row_blocks", region.rowBlocks()).entry("kv_block_bytes", region.blockBytes());
        }
    }

    private static void typeAndId(FlatMapWriter packer, NotifyMessage message, int extra) {
        packer.map(2 + extra).entry("type", message.type().wireName()).entry("transfer_id", message.transferId());
    }

    /**
     * An integer key that must lie in {@code [min, max]}; a plain cast would wrap a larger value into a
     * wrong but plausible one (2^32 + 1 would read as rank 1).
     */
    private static int intIn(FlatMapReader.Fields fields, String key, int min, int max) {
        long value = fields.integer(key);
        if (value < min || value > max) {
            throw new MalformedFrameException("notify message key '" + key + "' is " + value + ", outside "
                    + min + ".." + max + "; the sender is not speaking this protocol or is corrupt");
        }
        return (int) value;
    }

    private static StatusCode code(FlatMapReader.Fields fields) {
        int raw = intIn(fields, "code", Integer.MIN_VALUE, Integer.MAX_VALUE);
        try {
            StatusCode code = StatusCode.of(raw);
            if (!code.isFailure() && code != StatusCode.IN_PROGRESS) {
                throw new MalformedFrameException("write_failed carries code " + code.qualifiedName()
                        + ", which is not a failure; expected IN_PROGRESS (a timeout) or a code above 10");
            }
            return code;
        } catch (IllegalArgumentException e) {
            throw new MalformedFrameException("write_failed carries " + e.getMessage(), e);
        }
    }
}
