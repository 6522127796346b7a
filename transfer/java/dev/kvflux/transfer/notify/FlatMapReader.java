package dev.kvflux.transfer.notify;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A bounded reader of one flat msgpack map, the shape of every notify message. It walks the frame's bytes
 * once and allocates nothing whose size a peer chooses: every length and count is checked against the bytes
 * left in the frame before it is used, strings are only checked (strict UTF-8) and remembered as slices of the
 * frame, and the caller turns a slice into a {@code String} or a list only after checking it against that
 * field's own limit ({@link Fields#string}, {@link Fields#integers}).
 *
 * <p>Accepted shape: a map of at most {@value #MAX_KEYS} distinct string keys of at most
 * {@value #MAX_KEY_BYTES} bytes each, whose values are nil, booleans, integers, floats, strings, binaries, or
 * arrays of those scalars. Anything else (another top-level type, a nested map or array, an extension type, a
 * byte msgpack never uses, trailing bytes) is a {@link MalformedFrameException}; invalid UTF-8 is one whose
 * {@link MalformedFrameException#isInvalidUtf8()} is true. Not thread-safe; one reader per frame.
 */
final class FlatMapReader {
    /** Most keys in one message map; the largest message uses well under half. */
    static final int MAX_KEYS = 32;
    /** Longest key, in bytes. */
    static final int MAX_KEY_BYTES = 64;

    private final ByteBuffer bytes;
    private final int end;
    private int pos;
    /** The last scalar {@link #next()} read: its payload's place, or its number. */
    private int tokenOffset;
    private int tokenLength;
    private long tokenValue;

    private FlatMapReader(ByteBuffer bytes, int offset, int length) {
        this.bytes = bytes;
        this.pos = offset;
        this.end = offset + length;
    }

    /** The fields of the map in {@code bytes[offset, offset + length)}, which must hold exactly one map. */
    static Fields read(byte[] bytes, int offset, int length) {
        return read(ByteBuffer.wrap(bytes), offset, length);
    }

    /**
     * The fields of the map at absolute positions {@code [offset, offset + length)} of {@code bytes} (read, never
     * moved), which must hold exactly one map. The fields read from {@code bytes} when asked for, so it must stay
     * unchanged until they have been.
     */
    static Fields read(ByteBuffer bytes, int offset, int length) {
        return new FlatMapReader(bytes, offset, length).map();
    }

    /** The UTF-8 text at {@code [offset, offset + length)}, copied out of {@code bytes}. */
    private static String text(ByteBuffer bytes, int offset, int length) {
        byte[] copy = new byte[length];
        bytes.get(offset, copy);
        return new String(copy, StandardCharsets.UTF_8);
    }

    /** What a field's value is; {@link Field} says where its bytes are. */
    enum Kind { NIL, BOOLEAN, INTEGER, BIG_INTEGER, FLOAT, STRING, BINARY, ARRAY }

    /**
     * One value. For {@code STRING} and {@code BINARY}, {@code offset} and {@code length} are the payload's
     * place in the frame; for {@code ARRAY} they are the first element's place and the element count; for
     * {@code INTEGER} and {@code BOOLEAN} (1 or 0), {@code value} is the number.
     */
    record Field(Kind kind, int offset, int length, long value) {
    }

    /** The fields of one map, by key. */
    static final class Fields {
        private final ByteBuffer bytes;
        private final Map<String, Field> fields;

        private Fields(ByteBuffer bytes, Map<String, Field> fields) {
            this.bytes = bytes;
            this.fields = Collections.unmodifiableMap(fields);
        }

        /** The field, or null when the map lacks the key. */
        Field get(String key) {
            return fields.get(key);
        }

        /**
         * The string field {@code key}, whose UTF-8 form must be at most {@code maxBytes}.
         *
         * @throws MalformedFrameException if it is missing, not a string, or longer
         */
        String string(String key, int maxBytes) {
            Field field = required(key, Kind.STRING, "a string");
            if (field.length() > maxBytes) {
                throw new MalformedFrameException("notify message key '" + key + "' is " + field.length()
                        + " bytes, over its limit of " + maxBytes);
            }
            return text(bytes, field.offset(), field.length());
        }

        /**
         * The binary field {@code key}, at most {@code maxBytes} long, copied out.
         *
         * @throws MalformedFrameException if it is missing, not a binary, or longer
         */
        byte[] binary(String key, int maxBytes) {
            Field field = required(key, Kind.BINARY, "a binary");
            if (field.length() > maxBytes) {
                throw new MalformedFrameException("notify message key '" + key + "' is " + field.length()
                        + " bytes, over its limit of " + maxBytes);
            }
            byte[] copy = new byte[field.length()];
            bytes.get(field.offset(), copy);
            return copy;
        }

        /**
         * The string field {@code key} cut to at most {@code maxBytes} of UTF-8 (at a character boundary), with
         * a note of how many bytes were cut; nothing larger than the cut is allocated.
         */
        String truncatedString(String key, int maxBytes) {
            Field field = required(key, Kind.STRING, "a string");
            if (field.length() <= maxBytes) {
                return text(bytes, field.offset(), field.length());
            }
            int cut = field.offset() + maxBytes;
            while (cut > field.offset() && (bytes.get(cut) & 0xC0) == 0x80) {
                cut--;
            }
            return text(bytes, field.offset(), cut - field.offset()) + "... ("
                    + (field.offset() + field.length() - cut) + " more bytes cut)";
        }

        /**
         * The integer field {@code key}.
         *
         * @throws MalformedFrameException if it is missing or not an integer in the signed 64-bit range
         */
        long integer(String key) {
            return required(key, Kind.INTEGER, "an integer").value();
        }

        /**
         * The array field {@code key}, holding at most {@code maxCount} integers in the signed 64-bit range.
         *
         * @throws MalformedFrameException if it is missing, not an array, longer, or holds anything else
         */
        List<Long> integers(String key, int maxCount) {
            Field field = required(key, Kind.ARRAY, "an array of integers");
            if (field.length() > maxCount) {
                throw new MalformedFrameException("notify message key '" + key + "' holds " + field.length()
                        + " elements, over its limit of " + maxCount);
            }
            FlatMapReader elements = new FlatMapReader(bytes, field.offset(), bytes.limit() - field.offset());
            Long[] values = new Long[field.length()];
            for (int i = 0; i < values.length; i++) {
                Kind kind = elements.next();
                if (kind != Kind.INTEGER) {
                    throw new MalformedFrameException("notify message key '" + key + "' holds a "
                            + kind.name().toLowerCase(java.util.Locale.ROOT) + ", expected integers");
                }
                values[i] = elements.tokenValue;
            }
            return List.of(values);
        }

        private Field required(String key, Kind kind, String expected) {
            Field field = fields.get(key);
            if (field == null) {
                throw new MalformedFrameException("notify message lacks the key '" + key + "'");
            }
            if (field.kind() != kind) {
                throw new MalformedFrameException("notify message key '" + key + "' is a "
                        + field.kind().name().toLowerCase(java.util.Locale.ROOT) + ", expected " + expected);
            }
            return field;
        }
    }

    private Fields map() {
        if (pos >= end) {
            throw new MalformedFrameException("empty notify frame; expected one msgpack map");
        }
        int head = bytes.get(pos++) & 0xFF;
        int count;
        if ((head & 0xF0) == 0x80) {
            count = head & 0x0F;
        } else if (head == 0xDE) {
            count = unsigned(2);
        } else if (head == 0xDF) {
            count = unsigned(4);
        } else {
            throw new MalformedFrameException("notify frame starts with msgpack byte 0x" + Integer.toHexString(head)
                    + ", not a map; expected {\"type\": ..., \"transfer_id\": ...}");
        }
        if (Integer.toUnsignedLong(count) > MAX_KEYS) {
            throw new MalformedFrameException("notify frame's map claims " + Integer.toUnsignedString(count)
                    + " keys; at most " + MAX_KEYS + " are accepted");
        }
        Map<String, Field> fields = new HashMap<>(2 * count);
        for (int i = 0; i < count; i++) {
            String key = key();
            Field value = value();
            if (fields.put(key, value) != null) {
                throw new MalformedFrameException("notify frame repeats the key '" + LogText.escape(key) + "'");
            }
        }
        if (pos != end) {
            throw new MalformedFrameException("notify frame has " + (end - pos)
                    + " bytes after its map; send one map per frame" + (end - pos == NotifyAuth.ENVELOPE_BYTES
                            ? " (a signed frame? this receiver has no notify secret; give both sides the same one)"
                            : ""));
        }
        return new Fields(bytes, fields);
    }

    private String key() {
        Field key = scalar();
        if (key.kind() != Kind.STRING) {
            throw new MalformedFrameException("notify frame has a " + key.kind().name().toLowerCase(java.util.Locale.ROOT)
                    + " key; keys are strings");
        }
        if (key.length() > MAX_KEY_BYTES) {
            throw new MalformedFrameException("notify frame has a key of " + key.length() + " bytes; at most "
                    + MAX_KEY_BYTES + " are accepted");
        }
        return text(bytes, key.offset(), key.length());
    }

    /** A map value: a scalar, or an array of scalars whose elements are checked and skipped. */
    private Field value() {
        if (pos >= end) {
            throw truncated();
        }
        int head = bytes.get(pos) & 0xFF;
        int count;
        if ((head & 0xF0) == 0x90) {
            pos++;
            count = head & 0x0F;
        } else if (head == 0xDC) {
            pos++;
            count = unsigned(2);
        } else if (head == 0xDD) {
            pos++;
            count = unsigned(4);
        } else {
            return scalar();
        }
        // every element takes at least one byte: a count beyond what is left cannot be honest
        if (Integer.toUnsignedLong(count) > end - pos) {
            throw new MalformedFrameException("notify frame's array claims " + Integer.toUnsignedString(count)
                    + " elements with only " + (end - pos) + " bytes left");
        }
        int first = pos;
        for (int i = 0; i < count; i++) {
            next();
        }
        return new Field(Kind.ARRAY, first, count, 0);
    }

    /** One scalar as a field. */
    private Field scalar() {
        Kind kind = next();
        return new Field(kind, tokenOffset, tokenLength, tokenValue);
    }

    /**
     * Reads one scalar into the token fields and returns its kind, allocating nothing; a map, an array or an
     * extension here is a shape no notify message has.
     */
    private Kind next() {
        if (pos >= end) {
            throw truncated();
        }
        tokenOffset = 0;
        tokenLength = 0;
        tokenValue = 0;
        int head = bytes.get(pos++) & 0xFF;
        if (head <= 0x7F) {
            return integer(head);
        }
        if (head >= 0xE0) {
            return integer((byte) head);
        }
        if ((head & 0xE0) == 0xA0) {
            return string(head & 0x1F);
        }
        return switch (head) {
            case 0xC0 -> Kind.NIL;
            case 0xC2 -> Kind.BOOLEAN;
            case 0xC3 -> {
                tokenValue = 1;
                yield Kind.BOOLEAN;
            }
            case 0xCC -> integer(unsigned(1));
            case 0xCD -> integer(unsigned(2));
            case 0xCE -> integer(Integer.toUnsignedLong(unsigned(4)));
            case 0xCF -> {
                long value = signed(8);
                tokenValue = value;
                yield value < 0 ? Kind.BIG_INTEGER : Kind.INTEGER;
            }
            case 0xD0 -> integer(signed(1));
            case 0xD1 -> integer(signed(2));
            case 0xD2 -> integer(signed(4));
            case 0xD3 -> integer(signed(8));
            case 0xCA -> payload(4, Kind.FLOAT);
            case 0xCB -> payload(8, Kind.FLOAT);
            case 0xD9 -> string(unsigned(1));
            case 0xDA -> string(unsigned(2));
            case 0xDB -> string(unsigned(4));
            case 0xC4 -> payload(unsigned(1), Kind.BINARY);
            case 0xC5 -> payload(unsigned(2), Kind.BINARY);
            case 0xC6 -> payload(unsigned(4), Kind.BINARY);
            case 0xC1 -> throw new MalformedFrameException("notify frame holds msgpack byte 0xc1, which msgpack never"
                    + " uses: the frame is not msgpack");
            default -> throw new MalformedFrameException("notify frame holds a msgpack "
                    + ((head & 0xF0) == 0x80 || head == 0xDE || head == 0xDF ? "map"
                            : (head & 0xF0) == 0x90 || head == 0xDC || head == 0xDD ? "array" : "extension")
                    + " where a notify message has a scalar: nesting and extension types are not part of the protocol");
        };
    }

    private Kind integer(long value) {
        tokenValue = value;
        return Kind.INTEGER;
    }

    private Kind string(int length) {
        payload(length, Kind.STRING);
        if (!Utf8.isValid(bytes, tokenOffset, tokenLength)) {
            throw MalformedFrameException.invalidUtf8("notify frame holds a string that is not valid UTF-8");
        }
        return Kind.STRING;
    }

    private Kind payload(int length, Kind kind) {
        if (Integer.toUnsignedLong(length) > end - pos) {
            throw new MalformedFrameException("notify frame's " + kind.name().toLowerCase(java.util.Locale.ROOT)
                    + " claims " + Integer.toUnsignedString(length) + " bytes with only " + (end - pos) + " left");
        }
        tokenOffset = pos;
        tokenLength = length;
        pos += length;
        return kind;
    }

    /** The next {@code n} (1, 2 or 4) bytes as an unsigned big-endian number; 4 bytes may read negative. */
    private int unsigned(int n) {
        if (end - pos < n) {
            throw truncated();
        }
        int value = 0;
        for (int i = 0; i < n; i++) {
            value = value << 8 | bytes.get(pos++) & 0xFF;
        }
        return value;
    }

    /** The next {@code n} (1, 2, 4 or 8) bytes as a signed big-endian number. */
    private long signed(int n) {
        if (end - pos < n) {
            throw truncated();
        }
        long value = bytes.get(pos++);
        for (int i = 1; i < n; i++) {
            value = value << 8 | bytes.get(pos++) & 0xFF;
        }
        return value;
    }

    private MalformedFrameException truncated() {
        return new MalformedFrameException("notify frame ends in the middle of a msgpack value");
    }
}
