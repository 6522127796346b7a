package dev.kvflux.transfer.notify;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Writes the one shape every notify message has on the wire: a flat msgpack map of string keys whose values are
 * strings, integers, binaries or arrays of integers. Each value takes msgpack's shortest form (fixint, fixstr, str8, ...),
 * as msgpack's reference packers write it, so a MoRIIO peer reads what it would read from Python.
 * {@link FlatMapReader} reads the same shape back.
 */
final class FlatMapWriter {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream(64);

    /** The header of a map of {@code entries} key/value pairs. */
    FlatMapWriter map(int entries) {
        return header(entries, 0x80, 0xde, 0xdf);
    }

    /** The header of an array of {@code items} values. */
    FlatMapWriter array(int items) {
        return header(items, 0x90, 0xdc, 0xdd);
    }

    /** One string key and its string value. */
    FlatMapWriter entry(String key, String value) {
        return string(key).string(value);
    }

    /** One string key and its integer value. */
    FlatMapWriter entry(String key, long value) {
        return string(key).integer(value);
    }

    /** One string key and its binary value. */
    FlatMapWriter entry(String key, byte[] value) {
        string(key);
        int n = value.length;
        if (n < 1 << 8) {
            out.write(0xc4);
            out.write(n);
        } else if (n < 1 << 16) {
            out.write(0xc5);
            bigEndian(n, 2);
        } else {
            out.write(0xc6);
            bigEndian(n, 4);
        }
        out.write(value, 0, n);
        return this;
    }

    FlatMapWriter string(String value) {
        byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
        int n = utf8.length;
        if (n < 32) {
            out.write(0xa0 | n);
        } else if (n < 1 << 8) {
            out.write(0xd9);
            out.write(n);
        } else if (n < 1 << 16) {
            out.write(0xda);
            bigEndian(n, 2);
        } else {
            out.write(0xdb);
            bigEndian(n, 4);
        }
        out.write(utf8, 0, n);
        return this;
    }

    FlatMapWriter integer(long v) {
        if (v >= 0 && v < 1 << 7) {
            out.write((int) v);
        } else if (v < 0 && v >= -(1 << 5)) {
            out.write((int) v & 0xff);
        } else if (v >= 0) {
            if (v < 1 << 8) {
                out.write(0xcc);
                bigEndian(v, 1);
            } else if (v < 1 << 16) {
                out.write(0xcd);
                bigEndian(v, 2);
            } else if (v < 1L << 32) {
                out.write(0xce);
                bigEndian(v, 4);
            } else {
                out.write(0xcf);
                bigEndian(v, 8);
            }
        } else if (v >= -(1 << 7)) {
            out.write(0xd0);
            bigEndian(v, 1);
        } else if (v >= -(1 << 15)) {
            out.write(0xd1);
            bigEndian(v, 2);
        } else if (v >= -(1L << 31)) {
            out.write(0xd2);
            bigEndian(v, 4);
        } else {
            out.write(0xd3);
            bigEndian(v, 8);
        }
        return this;
    }

    byte[] toByteArray() {
        return out.toByteArray();
    }

    private FlatMapWriter header(int size, int fix, int sixteen, int thirtyTwo) {
        if (size < 0) {
            throw new IllegalArgumentException("a msgpack size cannot be negative, got " + size);
        }
        if (size < 16) {
            out.write(fix | size);
        } else if (size < 1 << 16) {
            out.write(sixteen);
            bigEndian(size, 2);
        } else {
            out.write(thirtyTwo);
            bigEndian(size, 4);
        }
        return this;
    }

    private void bigEndian(long value, int bytes) {
        for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
            out.write((int) (value >>> shift) & 0xff);
        }
    }
}
