package dev.kvflux.serving.role;

import dev.kvflux.transfer.ContentCheck;
import dev.kvflux.transfer.KvLayout;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * The stand-in model's KV as bytes, for engines whose memory holds them (the C simulator's shared host memory):
 * prefill's forward pass writes every block, and decode checks every block it received before it decodes.
 *
 * <p>Word {@code k} of block {@code i} (its place in the transfer's block list) of layer {@code l} is
 * {@code tag(t, l, i) ^ (k × φ)}, with {@link KvChecksum}'s tag, so every word of every block depends on the
 * transfer, the layer, the block's place and the word's place: KV that landed in another block, came for another
 * transfer, or was not written at all does not pass. Decode copies the blocks where it granted them into host memory
 * (from host memory, or from its GPU; blocks with consecutive ids, rising or falling, in one copy, up to
 * {@value #RUN_BLOCKS}) and
 * compares them word by word, off the notify event loop ({@link ContentCheck#blocking()}); the cost is counted ({@link #checkedBytes()},
 * {@link #checkNanos()}).
 */
final class KvBytes {
    private static final long PHI = 0x9E3779B97F4A7C15L;
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;
    /** Most blocks moved by one copy between the region and host memory. */
    static final int RUN_BLOCKS = 64;

    /** Where a side's KV bytes are: host memory read in place, or a GPU's, copied through host memory. */
    interface BlockIo {
        /** Copies {@code block} to {@code offset} of the region. */
        void write(long offset, MemorySegment block);

        /** Copies {@code into.byteSize()} bytes at {@code offset} of the region into {@code into}. */
        void read(long offset, MemorySegment into);

        /** Host memory: {@code region} itself. */
        static BlockIo host(MemorySegment region) {
            return new BlockIo() {
                @Override
                public void write(long offset, MemorySegment block) {
                    MemorySegment.copy(block, 0, region, offset, block.byteSize());
                }

                @Override
                public void read(long offset, MemorySegment into) {
                    MemorySegment.copy(region, offset, into, 0, into.byteSize());
                }
            };
        }
    }

    /**
     * What a block holds. {@code WORDS}: word {@code k} is {@code tag ^ (k × φ)}, written by the host.
     * {@code BYTES}: every byte is the tag's low byte, as a fill on the GPU writes it (one memset per block).
     */
    enum Pattern { WORDS, BYTES }

    private final BlockIo io;
    private final KvLayout.Rows layout;
    private final Pattern pattern;
    private final LongAdder checkedBytes = new LongAdder();
    private final LongAdder checkNanos = new LongAdder();
    private final LongAdder mismatchedBlocks = new LongAdder();

    /** The KV in a side's registered memory, reached through {@code io}, laid out as {@code layout}. */
    KvBytes(BlockIo io, KvLayout.Rows layout) {
        this(io, layout, Pattern.WORDS);
    }

    KvBytes(BlockIo io, KvLayout.Rows layout, Pattern pattern) {
        this.io = io;
        this.layout = layout;
        this.pattern = pattern;
    }

    /** The byte every byte of block {@code i} of layer {@code l} of the transfer holds under {@link Pattern#BYTES}. */
    static int byteOf(long idHash, int l, int i) {
        return (int) (KvChecksum.tag(idHash, l, i) & 0xFF);
    }

    /** Word {@code k} of a block of {@code tag}. */
    private long word(long tag, long k) {
        return pattern == Pattern.WORDS ? tag ^ (k * PHI) : (tag & 0xFF) * 0x0101010101010101L;
    }

    /** Writes every layer of {@code transferId}'s KV into {@code blocks}, as prefill's forward pass. */
    void write(String transferId, List<Long> blocks) {
        long idHash = KvChecksum.idHash(transferId);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment staging = arena.allocate(RUN_BLOCKS * layout.blockBytes(), Long.BYTES);
            for (int l = 0; l < layout.layers(); l++) {
                for (int i = 0; i < blocks.size(); ) {
                    int run = run(blocks, i);
                    MemorySegment span = staging.asSlice(0, run * layout.blockBytes());
                    for (int b = 0; b < run; b++) {
                        fill(span.asSlice(inSpan(blocks, i, run, b), layout.blockBytes()), KvChecksum.tag(idHash, l, i + b));
                    }
                    io.write(spanStart(blocks, l, i, run), span);
                    i += run;
                }
            }
        }
    }

    /** How many of {@code transferId}'s blocks (over all layers) at {@code blocks} do not hold its KV. */
    int mismatches(String transferId, List<Long> blocks) {
        long began = System.nanoTime();
        long idHash = KvChecksum.idHash(transferId);
        int bad = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment staging = arena.allocate(RUN_BLOCKS * layout.blockBytes(), Long.BYTES);
            for (int l = 0; l < layout.layers(); l++) {
                for (int i = 0; i < blocks.size(); ) {
                    int run = run(blocks, i);
                    MemorySegment span = staging.asSlice(0, run * layout.blockBytes());
                    io.read(spanStart(blocks, l, i, run), span);
                    for (int b = 0; b < run; b++) {
                        if (!holds(span.asSlice(inSpan(blocks, i, run, b), layout.blockBytes()),
                                KvChecksum.tag(idHash, l, i + b))) {
                            bad++;
                        }
                    }
                    i += run;
                }
            }
        }
        checkedBytes.add((long) layout.layers() * blocks.size() * layout.blockBytes());
        checkNanos.add(System.nanoTime() - began);
        mismatchedBlocks.add(bad);
        return bad;
    }

    /**
     * How many blocks from place {@code i} on have consecutive ids (at most {@value #RUN_BLOCKS}): they lie side by
     * side in every layer's row, so one copy moves them.
     */
    private static int run(List<Long> blocks, int i) {
        int step = i + 1 < blocks.size() && blocks.get(i + 1) == blocks.get(i) - 1 ? -1 : 1;
        int n = 1;
        while (n < RUN_BLOCKS && i + n < blocks.size() && blocks.get(i + n) == blocks.get(i + n - 1) + step) {
            n++;
        }
        return n;
    }

    /** Where place {@code i + b} of a run from place {@code i} lies in the run's span, and where the span starts. */
    private long inSpan(List<Long> blocks, int i, int run, int b) {
        boolean descending = run > 1 && blocks.get(i + 1) < blocks.get(i);
        return (descending ? run - 1 - b : b) * layout.blockBytes();
    }

    private long spanStart(List<Long> blocks, int layer, int i, int run) {
        return layout.offset(layer, Math.min(blocks.get(i), blocks.get(i + run - 1)));
    }

    private void fill(MemorySegment block, long tag) {
        long words = block.byteSize() / Long.BYTES;
        for (long k = 0; k < words; k++) {
            block.set(WORD, k * Long.BYTES, word(tag, k));
        }
        for (long b = words * Long.BYTES; b < block.byteSize(); b++) {
            block.set(ValueLayout.JAVA_BYTE, b, (byte) tag);
        }
    }

    private boolean holds(MemorySegment block, long tag) {
        long words = block.byteSize() / Long.BYTES;
        for (long k = 0; k < words; k++) {
            if (block.get(WORD, k * Long.BYTES) != word(tag, k)) {
                return false;
            }
        }
        for (long b = words * Long.BYTES; b < block.byteSize(); b++) {
            if (block.get(ValueLayout.JAVA_BYTE, b) != (byte) tag) {
                return false;
            }
        }
        return true;
    }

    /**
     * Decode's content check: {@link KvChecksum}'s value (what prefill sends with {@code write_done}) when every
     * block holds the transfer's KV, another value when one does not, so decode fails the request as corrupt.
     */
    ContentCheck check() {
        return new ContentCheck() {
            @Override
            public long of(String transferId, List<Long> decodeBlocks) {
                long expected = KvChecksum.of(transferId, layout.layers(), decodeBlocks);
                if (mismatches(transferId, decodeBlocks) == 0) {
                    return expected;
                }
                long other = expected ^ PHI;
                return other == 0 ? 2 : other;
            }

            /** It reads every byte back: not on the notify event loop. */
            @Override
            public boolean blocking() {
                return true;
            }
        };
    }

    long checkedBytes() {
        return checkedBytes.sum();
    }

    long checkNanos() {
        return checkNanos.sum();
    }

    long mismatchedBlocks() {
        return mismatchedBlocks.sum();
    }
}
