package dev.kvflux.serving.vllm;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * Reads one small flat msgpack map from a peer's frame, the shape of vLLM's registrations, within bounds: at most
 * {@value #MAX_KEYS} distinct string keys, values that are nil, booleans, integers, floats, strings, or arrays of at
 * most {@value #MAX_ARRAY} of those, no string longer than {@value #MAX_STRING_BYTES} bytes, and nothing after the
 * map. Every length and count is checked against the bytes left in the frame before anything is allocated for it.
 */
final class MsgpackMaps {
    static final int MAX_KEYS = 32;
    static final int MAX_ARRAY = 64;
    static final int MAX_STRING_BYTES = 1024;

    private MsgpackMaps() {
    }

    /**
     * The map in {@code frame}: strings as {@code String}, integers as {@code Long}, floats as {@code Double},
     * booleans as {@code Boolean}, nil as null, arrays as lists.
     *
     * @throws IllegalArgumentException saying what is wrong with the frame
     */
    static Map<String, Object> read(byte[] frame) {
        try (MessageUnpacker in = MessagePack.newDefaultUnpacker(frame)) {
            if (!in.hasNext() || in.getNextFormat().getValueType() != ValueType.MAP) {
                throw new IllegalArgumentException("a registration is one msgpack map");
            }
            int keys = in.unpackMapHeader();
            if (keys > MAX_KEYS || keys > remaining(in, frame)) {
                throw new IllegalArgumentException("a registration holds at most " + MAX_KEYS + " keys, this one says "
                        + keys);
            }
            Map<String, Object> map = new HashMap<>();
            for (int i = 0; i < keys; i++) {
                if (in.getNextFormat().getValueType() != ValueType.STRING) {
                    throw new IllegalArgumentException("a registration's keys are strings");
                }
                String key = string(in, frame);
                if (map.containsKey(key)) {
                    throw new IllegalArgumentException("a registration names key " + key + " twice");
                }
                Object value;
                if (in.getNextFormat().getValueType() == ValueType.ARRAY) {
                    int n = in.unpackArrayHeader();
                    if (n > MAX_ARRAY || n > remaining(in, frame)) {
                        throw new IllegalArgumentException("a registration's arrays hold at most " + MAX_ARRAY
                                + " values");
                    }
                    List<Object> items = new ArrayList<>(n);
                    for (int k = 0; k < n; k++) {
                        items.add(scalar(in, frame));
                    }
                    value = items;
                } else {
                    value = scalar(in, frame);
                }
                map.put(key, value);
            }
            if (in.hasNext()) {
                throw new IllegalArgumentException("a registration is one msgpack map and nothing after it");
            }
            return map;
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw new IllegalArgumentException("a registration is not well-formed msgpack: " + e.getMessage());
        }
    }

    private static Object scalar(MessageUnpacker in, byte[] frame) throws IOException {
        MessageFormat format = in.getNextFormat();
        return switch (format.getValueType()) {
            case NIL -> {
                in.unpackNil();
                yield null;
            }
            case BOOLEAN -> in.unpackBoolean();
            case INTEGER -> in.unpackLong();
            case FLOAT -> in.unpackDouble();
            case STRING -> string(in, frame);
            default -> throw new IllegalArgumentException("a registration's values are nil, booleans, numbers,"
                    + " strings or arrays of them, not " + format.getValueType().name().toLowerCase());
        };
    }

    private static String string(MessageUnpacker in, byte[] frame) throws IOException {
        int length = in.unpackRawStringHeader();
        if (length > MAX_STRING_BYTES || length > remaining(in, frame)) {
            throw new IllegalArgumentException("a registration's strings are at most " + MAX_STRING_BYTES
                    + " bytes and within the frame, this one says " + length);
        }
        byte[] bytes = in.readPayload(length);
        java.nio.charset.CharsetDecoder strict = java.nio.charset.StandardCharsets.UTF_8.newDecoder();
        try {
            return strict.decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new IllegalArgumentException("a registration's strings are well-formed UTF-8");
        }
    }

    private static long remaining(MessageUnpacker in, byte[] frame) {
        return frame.length - in.getTotalReadBytes();
    }
}
