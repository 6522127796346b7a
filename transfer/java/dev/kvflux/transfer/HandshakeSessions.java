package dev.kvflux.transfer;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.LogText;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Prefill's sessions into decodes that described their KV region: the handshake MoRIIO makes before its first
 * write. A kvflux decode registers its KV region with its engine and sends the engine's and the region's packed
 * descriptors ({@link KvRegion}) with every block list, signed like every notify frame. The first transfer to a
 * decode incarnation imports them into prefill's engine and opens one session from prefill's region into that
 * decode's; every later transfer to that incarnation shares it.
 *
 * <p>A session is only ever opened from the descriptors that incarnation itself sent, and a transfer writes
 * through the session of the incarnation its block list came from, so nothing is written into a decode before
 * prefill has its current incarnation's descriptors. Sessions are keyed by incarnation, which is new at every
 * start, so one decode reached at several addresses (through a relay, say) has one session. When a newer
 * incarnation comes from an address (decode restarted), the sessions of older incarnations reached there are closed,
 * with the mappings of their memory, as soon as the transfers that were writing through them have drained.
 *
 * <p>Bounded: at most {@value #MAX_DESCRIBED} described incarnations are kept (the oldest dropped first), and a
 * session nobody has written through for {@link #DEFAULT_IDLE} is closed (a decode that went away without a
 * restart at its address, as a pod that came back elsewhere); its incarnation's next block list, which describes
 * the region again, opens it anew. At most {@value #MAX_OPEN} sessions are open; past that the one idle longest is
 * closed, or, when every one is in use, the transfer fails. Thread-safe.
 */
public final class HandshakeSessions implements DecodeSessions, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(HandshakeSessions.class);
    /** Most described incarnations kept whose session is not open yet. */
    public static final int MAX_DESCRIBED = 256;
    /** Most sessions open at once (one per decode incarnation written to and not yet closed). */
    public static final int MAX_OPEN = 1024;
    /** How long a session nobody writes through stays open by default. */
    public static final Duration DEFAULT_IDLE = Duration.ofMinutes(5);

    /** This side's role and its peers', as its messages name them: prefill into decodes, or decode into prefills. */
    private final String self;
    private final String peer;
    private final DescribedEngine engine;
    private final MemoryRegion local;
    private final KvLayout.Rows own;
    private final long idleNanos;
    private final LongSupplier clock;
    private final Map<Long, KvRegion> described = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, KvRegion> eldest) {
            return size() > MAX_DESCRIBED;
        }
    };
    private final Map<Long, Open> open = new HashMap<>();
    /** The newest incarnation seen at each address (bounded with the sessions: pruned when they close). */
    private final Map<InetSocketAddress, Long> newest = new HashMap<>();
    private long opened;
    private long closed;
    private boolean shut;

    private static final class Open {
        final TransferSession session;
        final MemoryRegion remote;
        final KvLayout layout;
        final Set<InetSocketAddress> addresses = new HashSet<>();
        int users;
        long lastUsed;
        boolean superseded;

        Open(TransferSession session, MemoryRegion remote, KvLayout layout) {
            this.session = session;
            this.remote = remote;
            this.layout = layout;
        }
    }

    private HandshakeSessions(DescribedEngine engine, MemoryRegion local, KvLayout.Rows own, Duration idle,
            LongSupplier clock, String self, String peer) {
        this.self = self;
        this.peer = peer;
        this.engine = engine;
        this.local = local;
        this.own = own;
        this.idleNanos = idle.toNanos();
        this.clock = clock;
    }

    /**
     * Sessions from {@code local}, a region of {@code engine} laid out as {@code layout}, into the decodes that
     * describe theirs; idle ones close after {@link #DEFAULT_IDLE}.
     *
     * @throws IllegalArgumentException if {@code local} is smaller than the layout
     */
    public static HandshakeSessions of(DescribedEngine engine, MemoryRegion local, KvLayout.Rows layout) {
        return of(engine, local, layout, DEFAULT_IDLE, System::nanoTime);
    }

    /** As {@link #of(DescribedEngine, MemoryRegion, KvLayout.Rows)}, idle sessions closing after {@code idle} on {@code clock}. */
    public static HandshakeSessions of(DescribedEngine engine, MemoryRegion local, KvLayout.Rows layout, Duration idle,
            LongSupplier clock) {
        return create(engine, local, layout, idle, clock, "prefill", "decode");
    }

    /**
     * READ mode's sessions, the other way: from decode's {@code local} region into the prefills that describe theirs
     * with every {@code read_ready} ({@link DecodeSide.Builder#readFrom}); otherwise as {@link #of}.
     */
    public static HandshakeSessions intoPrefills(DescribedEngine engine, MemoryRegion local, KvLayout.Rows layout) {
        return create(engine, local, layout, DEFAULT_IDLE, System::nanoTime, "decode", "prefill");
    }

    private static HandshakeSessions create(DescribedEngine engine, MemoryRegion local, KvLayout.Rows layout,
            Duration idle, LongSupplier clock, String self, String peer) {
        Objects.requireNonNull(engine, "engine");
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(layout, "layout");
        Objects.requireNonNull(clock, "clock");
        if (idle.isNegative() || idle.isZero()) {
            throw new IllegalArgumentException("the idle time of a " + peer + " session must be positive, got " + idle);
        }
        if (local.size() < layout.regionBytes()) {
            throw new IllegalArgumentException(self + "'s region of " + local.size() + " bytes is smaller than its KV"
                    + " layout (" + layout.regionBytes() + " bytes)");
        }
        return new HandshakeSessions(engine, local, layout, idle, clock, self, peer);
    }

    @Override
    public synchronized void described(long incarnation, KvRegion region) {
        if (shut || incarnation == 0) {
            return;
        }
        KvRegion known = described.get(incarnation);
        if (known == null) {
            described.put(incarnation, region);
        } else if (!known.equals(region)) {
            LOG.debug("{} incarnation {} described another KV region ({}) than before ({}); keeping the first", peer,
                    incarnation, region, known);
        }
    }

    @Override
    public synchronized KvLayout layout(InetSocketAddress decode, long incarnation) {
        Open o = open.get(incarnation);
        if (o != null) {
            return o.layout;
        }
        return layoutOf(decode, incarnation, region(decode, incarnation));
    }

    @Override
    public synchronized TransferSession session(InetSocketAddress decode, long incarnation) {
        if (shut) {
            throw new IllegalStateException(self + "'s " + peer + " sessions are closed: " + self + " is shutting down");
        }
        long now = clock.getAsLong();
        closeIdle(now);
        Long current = newest.get(decode);
        Open o = open.get(incarnation);
        if (o != null && o.superseded || current != null && incarnation < current) {
            throw new IllegalStateException(peer + " " + LogText.hostPort(decode) + " restarted (incarnation "
                    + incarnation + " -> " + current + "); nothing is copied to or from its previous incarnation's"
                    + " memory");
        }
        if (o == null) {
            o = openSession(decode, incarnation, now);
        }
        o.users++;
        o.lastUsed = now;
        o.addresses.add(decode);
        if (current == null || current < incarnation) {
            newest.put(decode, incarnation);
            supersede(decode, incarnation);
        }
        return o.session;
    }

    private Open openSession(InetSocketAddress decode, long incarnation, long now) {
        if (open.size() >= MAX_OPEN && !closeLongestIdle()) {
            throw new IllegalStateException(MAX_OPEN + " " + peer + " sessions are open and in use; " + self + " opens no more");
        }
        KvRegion region = region(decode, incarnation);
        KvLayout layout = layoutOf(decode, incarnation, region);
        MemoryRegion remote = engine.importPeer(region.engineDescriptor(), region.memoryDescriptor());
        TransferSession session;
        try {
            if (remote.size() < layout.regionBytes()) {
                throw new IllegalArgumentException(peer + " " + LogText.hostPort(decode) + " described rows of "
                        + region.rowBlocks() + " blocks (" + layout.regionBytes() + " bytes) in a region of only "
                        + remote.size() + " bytes");
            }
            session = engine.createSession(local, remote);
        } catch (RuntimeException e) {
            engine.forgetPeer(remote);
            throw e;
        }
        Open fresh = new Open(session, remote, layout);
        fresh.lastUsed = now;
        open.put(incarnation, fresh);
        opened++;
        LOG.info("opened a session into {} {} (incarnation {}): {} region of {} bytes, rows of {} blocks", peer,
                LogText.hostPort(decode), incarnation, region.backend(), remote.size(), region.rowBlocks());
        return fresh;
    }

    @Override
    public synchronized void released(InetSocketAddress decode, long incarnation) {
        Open o = open.get(incarnation);
        if (o == null) {
            return;
        }
        o.users--;
        o.lastUsed = clock.getAsLong();
        if (o.superseded && o.users <= 0) {
            close(incarnation, o);
        }
    }

    /** Sessions open now (one per decode incarnation written to, until it is superseded and drained, or idle). */
    public synchronized int openSessions() {
        closeIdle(clock.getAsLong());
        return open.size();
    }

    /** Sessions opened and closed so far. */
    public synchronized long[] openedAndClosed() {
        return new long[] {opened, closed};
    }

    /** Closes every session and forgets every decode's memory; later lookups fail. */
    @Override
    public synchronized void close() {
        shut = true;
        for (Map.Entry<Long, Open> e : new ArrayList<>(open.entrySet())) {
            close(e.getKey(), e.getValue());
        }
        described.clear();
        newest.clear();
    }

    private void supersede(InetSocketAddress decode, long incarnation) {
        for (Map.Entry<Long, Open> e : new ArrayList<>(open.entrySet())) {
            Open o = e.getValue();
            if (e.getKey() < incarnation && o.addresses.contains(decode)) {
                o.superseded = true;
                if (o.users <= 0) {
                    close(e.getKey(), o);
                }
            }
        }
    }

    private void closeIdle(long now) {
        for (Map.Entry<Long, Open> e : new ArrayList<>(open.entrySet())) {
            Open o = e.getValue();
            if (o.users <= 0 && now - o.lastUsed > idleNanos) {
                close(e.getKey(), o);
            }
        }
    }

    private boolean closeLongestIdle() {
        Map.Entry<Long, Open> idlest = null;
        for (Map.Entry<Long, Open> e : open.entrySet()) {
            if (e.getValue().users <= 0 && (idlest == null || e.getValue().lastUsed < idlest.getValue().lastUsed)) {
                idlest = e;
            }
        }
        if (idlest == null) {
            return false;
        }
        close(idlest.getKey(), idlest.getValue());
        return true;
    }

    private void close(long incarnation, Open o) {
        open.remove(incarnation);
        closed++;
        // an address whose newest incarnation has no session left needs no entry: a later start there is newer
        newest.values().removeIf(v -> v == incarnation);
        try {
            engine.forgetPeer(o.remote);
        } catch (RuntimeException e) {
            LOG.warn("closing the session into {} incarnation {} failed: {}", peer, incarnation, e.toString());
        }
    }

    private KvRegion region(InetSocketAddress decode, long incarnation) {
        KvRegion region = incarnation == 0 ? null : described.get(incarnation);
        if (region == null) {
            throw new IllegalStateException(peer + " " + LogText.hostPort(decode) + " (incarnation " + incarnation
                    + ") has not described its KV region, so " + self + " has nowhere to copy " + (self.equals("prefill")
                    ? "to" : "from") + "; a kvflux " + peer + " with a transfer engine sends it with every "
                    + (peer.equals("decode") ? "block list" : "read_ready") + ": run " + peer + " with the same"
                    + " --backend as " + self);
        }
        if (!region.backend().equals(engine.backend())) {
            throw new IllegalStateException(peer + " " + LogText.hostPort(decode) + " keeps its KV on backend '"
                    + LogText.escape(region.backend()) + "' and " + self + " copies through '" + engine.backend()
                    + "'; run both roles with the same --backend");
        }
        return region;
    }

    private KvLayout layoutOf(InetSocketAddress decode, long incarnation, KvRegion region) {
        if (region.blockBytes() != own.blockBytes()) {
            throw new IllegalStateException(peer + " " + LogText.hostPort(decode) + " (incarnation " + incarnation
                    + ") has blocks of " + region.blockBytes() + " bytes per layer and " + self + " of " + own.blockBytes()
                    + "; run both roles with the same model");
        }
        return KvLayout.rows(own.layers(), (int) region.rowBlocks(), region.blockBytes());
    }
}
