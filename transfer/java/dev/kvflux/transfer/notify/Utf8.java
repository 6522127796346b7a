package dev.kvflux.transfer.notify;

import java.nio.ByteBuffer;

/** Strict UTF-8 checking without decoding: no overlong forms, no surrogates, nothing above U+10FFFF. */
final class Utf8 {
    private Utf8() {
    }

    /** Whether {@code bytes[offset, offset + length)} is well-formed UTF-8. Allocates nothing. */
    static boolean isValid(byte[] bytes, int offset, int length) {
        return isValid(ByteBuffer.wrap(bytes), offset, length);
    }

    /** Whether absolute positions {@code [offset, offset + length)} of {@code bytes} are well-formed UTF-8. */
    static boolean isValid(ByteBuffer bytes, int offset, int length) {
        int i = offset;
        int end = offset + length;
        while (i < end) {
            int b = bytes.get(i) & 0xFF;
            if (b < 0x80) {
                i++;
                continue;
            }
            int need;
            int min;
            int max = 0xBF;
            if (b >= 0xC2 && b <= 0xDF) {
                need = 1;
                min = 0x80;
            } else if (b >= 0xE0 && b <= 0xEF) {
                need = 2;
                min = b == 0xE0 ? 0xA0 : 0x80;
                max = b == 0xED ? 0x9F : 0xBF;
            } else if (b >= 0xF0 && b <= 0xF4) {
                need = 3;
                min = b == 0xF0 ? 0x90 : 0x80;
                max = b == 0xF4 ? 0x8F : 0xBF;
            } else {
                return false;
            }
            if (end - i - 1 < need) {
                return false;
            }
            int second = bytes.get(i + 1) & 0xFF;
            if (second < min || second > max) {
                return false;
            }
            for (int k = 2; k <= need; k++) {
                if ((bytes.get(i + k) & 0xC0) != 0x80) {
                    return false;
                }
            }
            i += need + 1;
        }
        return true;
    }
}
