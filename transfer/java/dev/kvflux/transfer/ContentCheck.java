package dev.kvflux.transfer;

import java.util.List;

/**
 * A check of a transfer's KV content, carried in {@code write_done}: prefill computes it over decode's blocks it
 * wrote, decode over the blocks it granted, and decode fails the request (as {@link ReceiveFailedException.Kind#CORRUPT})
 * when they differ. What it covers is the embedder's: a hash of tags in simulation, a GPU checksum of the bytes
 * in a real deployment. 0 means "not checked" on the wire, so a check never returns 0.
 */
@FunctionalInterface
public interface ContentCheck {
    /** No check: {@code write_done} carries none and decode checks nothing. */
    ContentCheck NONE = (transferId, decodeBlocks) -> 0;

    /**
     * The check of {@code transferId}'s KV written into {@code decodeBlocks} (decode's block ids, in the order of
     * the transfer's block list); never 0 for a real check.
     */
    long of(String transferId, List<Long> decodeBlocks);

    /**
     * Whether {@link #of} reads the KV itself (a copy back from a GPU, a pass over every byte), and so must not run
     * on the notify event loop: decode then checks on {@code Schedulers.boundedElastic()}. False by default.
     */
    default boolean blocking() {
        return false;
    }
}
