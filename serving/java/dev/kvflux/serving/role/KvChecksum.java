package dev.kvflux.serving.role;

import dev.kvflux.transfer.ContentCheck;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The content check of a transfer's KV in simulation. The simulated KV of block {@code i} of layer
 * {@code l} of transfer {@code t} is a tag derived from {@code (t, l, i)}; the check is a 64-bit FNV-1a
 * over every layer's tags paired with the decode block each was copied into. Prefill sends it with
 * {@code write_done} over the blocks it wrote; decode computes it over the blocks it granted; they differ
 * when the KV landed in other blocks or came for another transfer, and decode then fails the request
 * instead of decoding from wrong KV. Never 0 (0 means "no check" on the wire).
 */
final class KvChecksum {
    private static final long FNV_OFFSET = 0xcbf29ce484222325L;
    private static final long FNV_PRIME = 0x100000001b3L;

    private KvChecksum() {
    }

    /** The check as a {@link ContentCheck} for KV of {@code layers} layers, for both sides of a transfer. */
    static ContentCheck forLayers(int layers) {
        return (transferId, decodeBlocks) -> of(transferId, layers, decodeBlocks);
    }

    /** The check of {@code transferId}'s KV in {@code layers} layers written into {@code decodeBlocks}, in order. */
    static long of(String transferId, int layers, List<Long> decodeBlocks) {
        long idHash = idHash(transferId);
        long h = idHash;
        for (int l = 0; l < layers; l++) {
            for (int i = 0; i < decodeBlocks.size(); i++) {
                h = mixIn(mixIn(h, tag(idHash, l, i)), decodeBlocks.get(i));
            }
        }
        return h == 0 ? 1 : h;
    }

    /** The FNV-1a hash of the transfer id, the starting value of its blocks' tags. */
    static long idHash(String transferId) {
        long h = FNV_OFFSET;
        for (byte b : transferId.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * FNV_PRIME;
        }
        return h;
    }

    /** The tag of block {@code i} (its place in the transfer's block list) of layer {@code l}. */
    static long tag(long idHash, int l, int i) {
        return mix(idHash + 31L * l + 1_000_003L * i);
    }

    private static long mixIn(long h, long value) {
        for (int shift = 0; shift < 64; shift += 8) {
            h = (h ^ ((value >>> shift) & 0xff)) * FNV_PRIME;
        }
        return h;
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
