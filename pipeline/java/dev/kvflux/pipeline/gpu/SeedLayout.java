package dev.kvflux.pipeline.gpu;

import dev.kvflux.bindings.BatchPlan;

/**
 * The seed reproducer's KV layout: {@code layers} layers of {@code blocks} blocks of {@code blockBytes}
 * each, block b of layer l at {@code l * layerBytes + 2 * b * blockBytes} on both sides (every other
 * block, so no two blocks merge into one copy). The seed: 118 × 128 × 32 KiB, 8 MiB per layer.
 */
record SeedLayout(int layers, int blocks, long blockBytes) {
    static final SeedLayout SEED = new SeedLayout(118, 128, 32 * 1024);

    SeedLayout {
        if (layers < 1 || blocks < 1 || blockBytes < 1) {
            throw new IllegalArgumentException("layers, blocks and block bytes must be positive, got " + layers
                    + " layers, " + blocks + " blocks, " + blockBytes + " bytes");
        }
    }

    /** Bytes a layer spans: twice its blocks, since blocks sit in every other slot. */
    long layerBytes() {
        return 2L * blocks * blockBytes;
    }

    long bufferBytes() {
        return layers * layerBytes();
    }

    long offset(int layer, int block) {
        return layer * layerBytes() + 2L * block * blockBytes;
    }

    /** Bytes one request writes: layers × blocks × block bytes. */
    long bytesPerRequest() {
        return (long) layers * blocks * blockBytes;
    }

    /** One layer's batch: the same offsets on both sides, one block size. */
    BatchPlan layerPlan(int layer) {
        long[] offsets = new long[blocks];
        for (int b = 0; b < blocks; b++) {
            offsets[b] = offset(layer, b);
        }
        return BatchPlan.mirrored(offsets, blockBytes);
    }

    /**
     * The byte every position of block {@code block} of {@code layer} holds in request {@code request}:
     * never 0 (the gaps' value), and differing between neighbouring blocks, layers and requests.
     */
    static int fill(long request, int layer, int block) {
        long h = request * 0x9E3779B97F4A7C15L + layer * 0xC2B2AE3D27D4EB4FL + block * 0x165667B19E3779F9L;
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        h ^= h >>> 32;
        int v = (int) (h & 0xFF);
        return v == 0 ? 1 : v;
    }
}
