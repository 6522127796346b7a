package dev.kvflux.tools.repro;

import dev.kvflux.bindings.BatchPlan;

/**
 * The shape of one reproducer request: {@code layers} batches of {@code blocks} blocks of
 * {@code blockBytes} each, one batch per layer. Block {@code b} of layer {@code l} sits at offset
 * {@code l × layerStride + 2 × b × blockBytes} on both sides, every other block, so that no two blocks
 * of a batch are neighbours and none can be merged.
 */
public record ReproGeometry(int layers, int blocks, long blockBytes) {

    /**
     * The geometry of vLLM's MoRI-IO measurement: 118 layers × 128 blocks × 32 KiB (4 MiB written per layer,
     * 8 MiB stride).
     */
    public static final ReproGeometry VLLM_MORI_IO = new ReproGeometry(118, 128, 32 * 1024);

    public ReproGeometry {
        if (layers <= 0 || blocks <= 0 || blockBytes <= 0) {
            throw new IllegalArgumentException("layers, blocks and block size must be positive, got "
                    + layers + " × " + blocks + " × " + blockBytes + " bytes");
        }
    }

    /** The distance between two layers' first blocks: room for every other block. */
    public long layerStride() {
        return 2L * blocks * blockBytes;
    }

    /** The bytes a buffer on each side must hold. */
    public long regionBytes() {
        return layers * layerStride();
    }

    /** The bytes one request writes. */
    public long requestBytes() {
        return (long) layers * blocks * blockBytes;
    }

    /** Where block {@code block} of layer {@code layer} sits, on both sides. */
    public long offset(int layer, int block) {
        return layer * layerStride() + 2L * block * blockBytes;
    }

    /** Layer {@code layer}'s batch: the same offsets on both sides, one size for every block. */
    public BatchPlan plan(int layer) {
        if (layer < 0 || layer >= layers) {
            throw new IndexOutOfBoundsException("layer " + layer + " is outside 0.." + (layers - 1));
        }
        long[] offsets = new long[blocks];
        for (int b = 0; b < blocks; b++) {
            offsets[b] = offset(layer, b);
        }
        return BatchPlan.mirrored(offsets, blockBytes);
    }
}
