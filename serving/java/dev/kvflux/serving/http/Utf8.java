package dev.kvflux.serving.http;

/**
 * Checks that bytes are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF) without
 * decoding them into a buffer of their own: a body of megabytes is checked in place.
 */
final class Utf8 {
    private Utf8() {
    }

    /** The index of the first byte that starts a malformed sequence, or -1 when all of {@code bytes} is well-formed. */
    static int firstMalformed(byte[] bytes) {
        return firstMalformed(io.netty.buffer.Unpooled.wrappedBuffer(bytes));
    }

    /**
     * The index (from the reader index) of the first byte of {@code bytes}' readable bytes that starts a malformed
     * sequence, or -1 when they are all well-formed. The buffer's indexes are left as they are.
     */
    static int firstMalformed(io.netty.buffer.ByteBuf buffer) {
        int base = buffer.readerIndex();
        int i = 0;
        int n = buffer.readableBytes();
        while (i < n) {
            int b = buffer.getByte(base + i) & 0xFF;
            if (b < 0x80) {
                i++;
                continue;
            }
            int length;
            int min;
            if (b >= 0xC2 && b <= 0xDF) {
                length = 2;
                min = 0x80;
            } else if (b >= 0xE0 && b <= 0xEF) {
                length = 3;
                min = 0x800;
            } else if (b >= 0xF0 && b <= 0xF4) {
                length = 4;
                min = 0x10000;
            } else {
                return i;
            }
            if (i + length > n) {
                return i;
            }
            int code = b & (0xFF >> (length + 1));
            for (int k = 1; k < length; k++) {
                int c = buffer.getByte(base + i + k) & 0xFF;
                if ((c & 0xC0) != 0x80) {
                    return i;
                }
                code = code << 6 | c & 0x3F;
            }
            if (code < min || code > 0x10FFFF || code >= 0xD800 && code <= 0xDFFF) {
                return i;
            }
            i += length;
        }
        return -1;
    }
}
