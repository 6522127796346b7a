package dev.kvflux.pipeline.net;

import dev.kvflux.bindings.StatusCode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueType;

/**
 * msgpack encoding of {@link NotifyMessage}s: one map per message with string keys, as MoRIIO sends them
 * ({@code type}, {@code transfer_id}, {@code req_id}, {@code block_notify_list}, {@code decode_rank}),
 * and for {@code write_failed} the status {@code code} as MoRI's number and the {@code reason} text.
 * Unknown keys are ignored, so newer senders stay readable. With a notify secret, the keys {@code ts} and
 * {@code mac} are added ({@link NotifyAuth}).
 */
public final class NotifyCodec {
    private NotifyCodec() {
    }

    /** The message's msgpack bytes. */
    public static byte[] encode(NotifyMessage message) {
        return encode(message, 0, null);
    }

    /**
     * The message's msgpack bytes, with the authentication keys {@code ts} and {@code mac} added when
     * {@code mac} is not null (see {@link NotifyAuth}).
     */
    static byte[] encode(NotifyMessage message, long ts, byte[] mac) {
        int extra = mac == null ? 0 : 2;
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            switch (message) {
                case NotifyMessage.RemoteBlocks blocks -> {
                    packer.packMapHeader(5 + extra);
                    packString(packer, "type", blocks.type());
                    packString(packer, "req_id", blocks.reqId());
                    packString(packer, "transfer_id", blocks.transferId());
                    packer.packString("block_notify_list").packArrayHeader(blocks.blockNotifyList().size());
                    for (long block : blocks.blockNotifyList()) {
                        packer.packLong(block);
                    }
                    packer.packString("decode_rank").packInt(blocks.decodeRank());
                }
                case NotifyMessage.WriteFailed failed -> {
                    packer.packMapHeader(4 + extra);
                    packString(packer, "type", failed.type());
                    packString(packer, "transfer_id", failed.transferId());
                    packer.packString("code").packInt(failed.code().value());
                    packString(packer, "reason", failed.reason());
                }
                case NotifyMessage.Abort abort -> {
                    packer.packMapHeader(3 + extra);
                    packString(packer, "type", abort.type());
                    packString(packer, "transfer_id", abort.transferId());
                    packString(packer, "reason", abort.reason());
                }
                case NotifyMessage.WriteDone done -> packTypeAndId(packer, done, extra);
                case NotifyMessage.Release release -> packTypeAndId(packer, release, extra);
            }
            if (mac != null) {
                packer.packString("ts").packLong(ts);
                packer.packString("mac").packBinaryHeader(mac.length).writePayload(mac);
            }
            return packer.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException("msgpack encoding into memory failed", e);
        }
    }

    /**
     * The message in {@code bytes}.
     *
     * @throws MalformedFrameException saying what was wrong, if the bytes are not one message map
     */
    public static NotifyMessage decode(byte[] bytes) {
        return message(readMap(bytes));
    }

    /** A decoded frame with its authentication keys, each null when absent. */
    record Signed(NotifyMessage message, Long ts, byte[] mac) {
    }

    /**
     * The message in {@code bytes} with its {@code ts} and {@code mac}.
     *
     * @throws MalformedFrameException saying what was wrong, if the bytes are not one message map or an
     *     authentication key has the wrong type
     */
    static Signed decodeSigned(byte[] bytes) {
        Map<String, Value> map = readMap(bytes);
        NotifyMessage message = message(map);
        Value mac = map.get("mac");
        if (mac != null && !mac.isBinaryValue()) {
            throw new MalformedFrameException("notify message key 'mac' is a " + mac.getValueType()
                    + ", expected binary");
        }
        return new Signed(message, map.containsKey("ts") ? integer(map, "ts") : null,
                mac == null ? null : mac.asBinaryValue().asByteArray());
    }

    private static NotifyMessage message(Map<String, Value> map) {
        String type = string(map, "type");
        String transferId = string(map, "transfer_id");
        return switch (type) {
            case "write_done" -> new NotifyMessage.WriteDone(transferId);
            case "release" -> new NotifyMessage.Release(transferId);
            case "abort" -> new NotifyMessage.Abort(transferId, string(map, "reason"));
            case "write_failed" -> new NotifyMessage.WriteFailed(transferId, code(map), string(map, "reason"));
            case "remote_blocks" -> new NotifyMessage.RemoteBlocks(string(map, "req_id"), transferId,
                    blocks(map), intIn(map, "decode_rank", 0, Integer.MAX_VALUE));
            default -> throw new MalformedFrameException("unknown notify message type '" + type
                    + "'; expected remote_blocks, write_done, write_failed, release or abort");
        };
    }

    private static Map<String, Value> readMap(byte[] bytes) {
        Map<String, Value> map = new HashMap<>();
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(bytes)) {
            if (!unpacker.hasNext()) {
                throw new MalformedFrameException("empty notify frame; expected one msgpack map");
            }
            Value value = unpacker.unpackValue();
            if (unpacker.hasNext()) {
                throw new MalformedFrameException("notify frame holds more than one msgpack value; send one map per frame");
            }
            if (value.getValueType() != ValueType.MAP) {
                throw new MalformedFrameException("notify frame is a msgpack " + value.getValueType()
                        + ", not a map; expected {\"type\": ..., \"transfer_id\": ...}");
            }
            for (Map.Entry<Value, Value> entry : value.asMapValue().entrySet()) {
                if (entry.getKey().isStringValue()) {
                    map.put(entry.getKey().asStringValue().asString(), entry.getValue());
                }
            }
        } catch (MessagePackException | IOException e) {
            throw new MalformedFrameException("notify frame is not valid msgpack: " + e.getMessage(), e);
        }
        return map;
    }

    /**
     * The transport acknowledgement a server sends back for each message it accepted:
     * {@code {"type": "ack", "transfer_id": ...}}. It is not a MoRIIO message; only kvflux peers see it.
     */
    static byte[] encodeAck(String transferId) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packMapHeader(2);
            packString(packer, "type", "ack");
            packString(packer, "transfer_id", transferId);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException("msgpack encoding into memory failed", e);
        }
    }

    /** The transfer id an acknowledgement names. */
    static String decodeAck(byte[] bytes) {
        Map<String, Value> map = readMap(bytes);
        String type = string(map, "type");
        if (!type.equals("ack")) {
            throw new MalformedFrameException("expected an ack from the notify server, got '" + type + "'");
        }
        return string(map, "transfer_id");
    }

    private static void packString(MessageBufferPacker packer, String key, String value) throws IOException {
        packer.packString(key).packString(value);
    }

    private static void packTypeAndId(MessageBufferPacker packer, NotifyMessage message, int extra)
            throws IOException {
        packer.packMapHeader(2 + extra);
        packString(packer, "type", message.type());
        packString(packer, "transfer_id", message.transferId());
    }

    private static Value required(Map<String, Value> map, String key) {
        Value value = map.get(key);
        if (value == null) {
            throw new MalformedFrameException("notify message lacks the key '" + key + "'");
        }
        return value;
    }

    private static String string(Map<String, Value> map, String key) {
        Value value = required(map, key);
        if (!value.isStringValue()) {
            throw new MalformedFrameException("notify message key '" + key + "' is a " + value.getValueType()
                    + ", expected a string");
        }
        return value.asStringValue().asString();
    }

    private static long integer(Map<String, Value> map, String key) {
        Value value = required(map, key);
        if (!value.isIntegerValue() || !value.asIntegerValue().isInLongRange()) {
            throw new MalformedFrameException("notify message key '" + key + "' is a " + value.getValueType()
                    + ", expected an integer");
        }
        return value.asIntegerValue().toLong();
    }

    /**
     * An integer key that must lie in {@code [min, max]}; a plain cast would wrap a larger value into a
     * wrong but plausible one (2^32 + 1 would read as rank 1).
     */
    private static int intIn(Map<String, Value> map, String key, int min, int max) {
        long value = integer(map, key);
        if (value < min || value > max) {
            throw new MalformedFrameException("notify message key '" + key + "' is " + value + ", outside "
                    + min + ".." + max + "; the sender is not speaking this protocol or is corrupt");
        }
        return (int) value;
    }

    private static StatusCode code(Map<String, Value> map) {
        int raw = intIn(map, "code", Integer.MIN_VALUE, Integer.MAX_VALUE);
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

    private static List<Long> blocks(Map<String, Value> map) {
        Value value = required(map, "block_notify_list");
        if (!value.isArrayValue()) {
            throw new MalformedFrameException("notify message key 'block_notify_list' is a "
                    + value.getValueType() + ", expected an array of integers");
        }
        List<Long> blocks = new ArrayList<>(value.asArrayValue().size());
        for (Value block : value.asArrayValue()) {
            if (!block.isIntegerValue() || !block.asIntegerValue().isInLongRange()) {
                throw new MalformedFrameException("block_notify_list holds a " + block.getValueType()
                        + ", expected integers");
            }
            blocks.add(block.asIntegerValue().toLong());
        }
        return blocks;
    }
}
