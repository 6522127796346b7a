package dev.kvflux.transfer;

import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The newest {@link Incarnation} seen of each peer, by its notify address: the one rule both sides of a
 * transfer apply to the incarnation a peer's message carries. An older incarnation than the newest known is
 * {@linkplain Verdict#STALE stale} (a message from before the peer restarted: drop it); a newer one means the peer
 * {@linkplain Verdict#RESTARTED restarted} (what was aimed at its previous life is gone); the first one, or the
 * newest again, is {@linkplain Verdict#CURRENT current}. Peers come from requests, so at most
 * {@value Incarnation#MAX_PEERS_TRACKED} are tracked: past that, a new peer's messages are
 * {@linkplain Verdict#UNTRACKED used without restart tracking}. Thread-safe.
 */
public final class PeerIncarnations {

    /** What a message's incarnation says about its sender. */
    public enum Verdict {
        /** The peer's newest incarnation (or its first): use the message. */
        CURRENT,
        /** Older than the newest known: the peer restarted since; drop the message. */
        STALE,
        /** Newer than the one known: the peer restarted; fail what was aimed at its previous incarnation. */
        RESTARTED,
        /** A peer beyond the tracking bound: use the message; restarts of this peer are not noticed. */
        UNTRACKED
    }

    /**
     * The verdict on one incarnation and the newest known before it (0 when none was).
     *
     * @param verdict what the incarnation says
     * @param previous the newest incarnation known of the peer before this one; 0 if none
     */
    public record Seen(Verdict verdict, long previous) {
    }

    private final Map<InetSocketAddress, Long> newest = new ConcurrentHashMap<>();
    private final int maxPeers;

    /** Tracks up to {@value Incarnation#MAX_PEERS_TRACKED} peers. */
    public PeerIncarnations() {
        this(Incarnation.MAX_PEERS_TRACKED);
    }

    /** Tracks up to {@code maxPeers} peers. */
    public PeerIncarnations(int maxPeers) {
        if (maxPeers < 1) {
            throw new IllegalArgumentException("track at least one peer, got " + maxPeers);
        }
        this.maxPeers = maxPeers;
    }

    /**
     * Peer {@code peer} sent a message from {@code incarnation} (not 0: 0 means the sender does not say, and is
     * not a verdict's business). Records it when it is the newest.
     */
    public Seen observe(InetSocketAddress peer, long incarnation) {
        if (incarnation == 0) {
            throw new IllegalArgumentException("incarnation 0 means unknown; do not observe it");
        }
        long known = newest.getOrDefault(peer, 0L);
        if (incarnation < known) {
            return new Seen(Verdict.STALE, known);
        }
        if (known == 0 && newest.size() >= maxPeers) {
            return new Seen(Verdict.UNTRACKED, 0);
        }
        if (incarnation > known && newest.merge(peer, incarnation, Math::max) == incarnation && known != 0) {
            return new Seen(Verdict.RESTARTED, known);
        }
        return new Seen(Verdict.CURRENT, known);
    }

    /** The newest incarnation seen of {@code peer}; 0 if none. */
    public long newest(InetSocketAddress peer) {
        return newest.getOrDefault(peer, 0L);
    }
}
