package dev.kvflux.transfer;

import java.util.concurrent.ThreadLocalRandom;

/**
 * An instance's incarnation: an id that is new at every start and larger for a later start. Its high bits
 * are the start's wall-clock millisecond and its low 16 bits random, so two starts in the same millisecond
 * still differ and a peer can tell which requests came before a restart ({@link #startMillis}).
 */
public final class Incarnation {
    private static final int RANDOM_BITS = 16;
    /**
     * The most peers (by notify address) whose incarnation a role tracks: addresses come from requests, so
     * the map is bounded; a deployment has far fewer instances.
     */
    public static final int MAX_PEERS_TRACKED = 4096;

    private Incarnation() {
    }

    /** A fresh incarnation for an instance starting now; always positive. */
    public static long next() {
        return (System.currentTimeMillis() << RANDOM_BITS) | ThreadLocalRandom.current().nextInt(1, 1 << RANDOM_BITS);
    }

    /** The wall-clock millisecond the incarnation's instance started. */
    public static long startMillis(long incarnation) {
        return incarnation >>> RANDOM_BITS;
    }
}
