package dev.kvflux.pipeline.gpu;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Decode's check of the bytes it received, on a host copy of its buffer: every byte of every block must
 * hold the request's fill value for that block, and every byte between blocks must still be 0.
 */
final class ByteVerifier {
    private final SeedLayout layout;
    private final MemorySegment patterns;
    private final MemorySegment zeros;

    ByteVerifier(SeedLayout layout, Arena arena) {
        this.layout = layout;
        long block = layout.blockBytes();
        this.patterns = arena.allocate(256 * block);
        for (int v = 0; v < 256; v++) {
            patterns.asSlice(v * block, block).fill((byte) v);
        }
        this.zeros = arena.allocate(block);
    }

    /** Mismatched bytes and the layers holding any, for request {@code request}. */
    record Result(long checkedBytes, long mismatchedBytes, int badLayers) {
    }

    Result check(MemorySegment host, long request) {
        long block = layout.blockBytes();
        long mismatched = 0;
        int badLayers = 0;
        for (int l = 0; l < layout.layers(); l++) {
            long layerMismatches = 0;
            for (int b = 0; b < layout.blocks(); b++) {
                long at = layout.offset(l, b);
                int v = SeedLayout.fill(request, l, b);
                layerMismatches += count(host, at, patterns, v * block, block);
                layerMismatches += count(host, at + block, zeros, 0, block);
            }
            if (layerMismatches > 0) {
                badLayers++;
                mismatched += layerMismatches;
            }
        }
        return new Result(layout.bufferBytes(), mismatched, badLayers);
    }

    private static long count(MemorySegment host, long at, MemorySegment expected, long from, long size) {
        long first = MemorySegment.mismatch(host, at, at + size, expected, from, from + size);
        if (first < 0) {
            return 0;
        }
        long n = 0;
        for (long i = first; i < size; i++) {
            if (host.get(java.lang.foreign.ValueLayout.JAVA_BYTE, at + i)
                    != expected.get(java.lang.foreign.ValueLayout.JAVA_BYTE, from + i)) {
                n++;
            }
        }
        return n;
    }
}
