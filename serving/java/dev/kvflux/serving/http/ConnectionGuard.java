package dev.kvflux.serving.http;

import io.netty.channel.Channel;
import io.netty.channel.ChannelPipeline;
import io.netty.util.AttributeKey;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import reactor.netty.Connection;
import reactor.netty.NettyPipeline;

/**
 * One HTTP server's connections, shared between client addresses so that no client can hold them all
 * ({@link ConnectionLimits}). Every connection is in one of three states: sending its request's head (from when it
 * opens, or from the first byte of its next request), serving a request (head received, answer not yet ended), or idle
 * between requests. A connection still sending its head when the header timeout passes is closed, however steadily
 * its bytes trickle in. When a new connection would go past a bound, room is made by closing, oldest first, a
 * connection that is still sending its head (and has had half a second to), then an idle one; never one serving a
 * request. Only when there is none is the new connection itself closed, so the accept path stays open to a client
 * that sends its request at once, even while another holds every connection it may.
 *
 * <p>Per-address bounds count connections that are not trusted. On a server that trusts signed requests (a role's,
 * with a notify secret), a connection becomes trusted once a request on it passes its signature check
 * ({@link #trust(Connection)}): the proxy's connections then leave the strangers' small share ({@code maxUntrusted})
 * for the server's whole cap. Elsewhere nothing is trusted. A connection whose client stops reading its answer is
 * closed after the write timeout, and when one address has more such connections than it may, the one stalled longest
 * is closed at once.
 *
 * <p>Connections are registered from {@link #install}, on each accepted channel; the bookkeeping is guarded by the
 * guard's lock, whatever event loop a channel runs on. Thread-safe.
 */
public final class ConnectionGuard {
    /** How long a connection sending its head is spared from being closed to make room: half a second. */
    static final long MIN_EVICT_AGE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final AttributeKey<Conn> CONN = AttributeKey.valueOf("kvflux.connection-guard");

    private enum State { HEAD, SERVING, IDLE }

    private final int maxConnections;
    private final int softCap;
    private final ConnectionLimits limits;
    private final boolean trustsSigned;
    private final LongSupplier nanoClock;

    private final Map<InetAddress, Peer> peers = new HashMap<>();
    private final LinkedHashSet<Conn> untrustedHead = new LinkedHashSet<>();
    private final LinkedHashSet<Conn> untrustedIdle = new LinkedHashSet<>();
    private final LinkedHashSet<Conn> trustedIdle = new LinkedHashSet<>();
    private int open;
    private int untrusted;

    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong evicted = new AtomicLong();
    private final AtomicLong headerTimeouts = new AtomicLong();
    private final AtomicLong writeStalls = new AtomicLong();

    /**
     * A guard for a server of at most {@code maxConnections} connections under {@code limits}; {@code trustsSigned}:
     * whether requests with a valid signature make their connection trusted.
     */
    public ConnectionGuard(int maxConnections, ConnectionLimits limits, boolean trustsSigned) {
        this(maxConnections, limits, trustsSigned, System::nanoTime);
    }

    ConnectionGuard(int maxConnections, ConnectionLimits limits, boolean trustsSigned, LongSupplier nanoClock) {
        if (maxConnections < 1) {
            throw new IllegalArgumentException("the HTTP server connection cap must be at least 1, got " + maxConnections);
        }
        this.maxConnections = maxConnections;
        // room is made a little before the cap, so that the connection that needs it is not the one refused
        this.softCap = Math.max(1, maxConnections - Math.max(1, maxConnections / 16));
        this.limits = Objects.requireNonNull(limits, "limits");
        this.trustsSigned = trustsSigned;
        this.nanoClock = nanoClock;
    }

    /**
     * Marks the connection of a request whose signature passed as trusted, where its server trusts signed requests:
     * it no longer counts against its address's bounds or the strangers' share.
     */
    public static void trust(Connection connection) {
        Conn conn = connection.channel().attr(CONN).get();
        if (conn != null) {
            conn.guard().trusted(conn);
        }
    }

    /**
     * Makes the connection of an answer given without (all of) its request's body close gently: when the server closes
     * it after the answer, it first stops sending (so the client reads the whole answer) and for up to
     * {@link #LINGER_MILLIS} ms reads and drops whatever the client still sends, instead of resetting a client that
     * is still sending its body before it could read the answer. Nothing is kept of those bytes.
     */
    public static void lingerOnClose(Connection connection) {
        Channel channel = connection.channel();
        Conn conn = channel.attr(CONN).get();
        if (conn == null) {
            return;
        }
        conn.linger = true;
        // from now on what the client still sends is dropped as it is read, before the HTTP codec, so none of it
        // queues for a handler that will never ask for it; the connection goes at the linger's end in any case
        channel.eventLoop().execute(() -> conn.dropping = true);
        channel.eventLoop().schedule(() -> {
            channel.close();
        }, LINGER_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** How long a connection closed without reading its request's body drains it before it is closed for good. */
    public static final long LINGER_MILLIS = 1_000;

    /**
     * Registers a newly accepted channel and adds the handlers that follow its state, or closes it at once when no
     * room can be made for it. Called from the server's {@code doOnChannelInit}, after its HTTP codec is in place.
     */
    public void install(Channel channel, SocketAddress remote) {
        if (remote == null) {
            remote = channel.remoteAddress();
        }
        InetAddress address = remote instanceof InetSocketAddress inet && inet.getAddress() != null ? inet.getAddress()
                : InetAddress.getLoopbackAddress();
        Conn conn;
        synchronized (this) {
            conn = admit(channel, address);
        }
        if (conn == null) {
            refused.incrementAndGet();
            channel.close();
            return;
        }
        channel.attr(CONN).set(conn);
        channel.closeFuture().addListener(closed -> closed(conn));
        ChannelPipeline pipeline = channel.pipeline();
        if (pipeline.get(NettyPipeline.HttpCodec) != null) {
            pipeline.addBefore(NettyPipeline.HttpCodec, "kvflux.guard.bytes", new GuardHandlers.Bytes(conn));
            pipeline.addAfter(NettyPipeline.HttpCodec, "kvflux.guard.http", new GuardHandlers.Messages(conn));
        } else {
            pipeline.addFirst("kvflux.guard.bytes", new GuardHandlers.Bytes(conn));
            pipeline.addLast("kvflux.guard.http", new GuardHandlers.Messages(conn));
        }
        headerDeadline(conn);
    }

    /** The new connection, registered, or null when no room could be made for it. Guarded by this. */
    private Conn admit(Channel channel, InetAddress address) {
        Peer peer = peers.computeIfAbsent(address, Peer::new);
        if (trustsSigned && untrusted >= limits.maxUntrusted()
                && !evictOldHead(untrustedHead) && !evictFirst(untrustedIdle)) {
            return forgetIfEmpty(peer);
        }
        if (peer.head.size() >= limits.maxPendingPerAddress() && !evictOldHead(peer.head)) {
            return forgetIfEmpty(peer);
        }
        if (peer.open >= limits.maxPerAddress() && !evictOldHead(peer.head) && !evictFirst(peer.idle)) {
            return forgetIfEmpty(peer);
        }
        if (open >= softCap && !evictOldHead(untrustedHead) && !evictFirst(untrustedIdle)
                && !evictFirst(trustedIdle) && open >= maxConnections) {
            return forgetIfEmpty(peer);
        }
        Conn conn = new Conn(this, channel, peer, nanoClock.getAsLong());
        open++;
        untrusted++;
        peer.open++;
        peer.head.add(conn);
        untrustedHead.add(conn);
        return conn;
    }

    private Conn forgetIfEmpty(Peer peer) {
        if (peer.open == 0 && peer.stalled.isEmpty()) {
            peers.remove(peer.address);
        }
        return null;
    }

    /** Closes the oldest connection of {@code heads} if it has been sending its head for long enough. */
    private boolean evictOldHead(LinkedHashSet<Conn> heads) {
        Iterator<Conn> oldest = heads.iterator();
        if (!oldest.hasNext()) {
            return false;
        }
        Conn conn = oldest.next();
        if (nanoClock.getAsLong() - conn.since < MIN_EVICT_AGE_NANOS) {
            return false;
        }
        evict(conn);
        return true;
    }

    private boolean evictFirst(LinkedHashSet<Conn> conns) {
        Iterator<Conn> oldest = conns.iterator();
        if (!oldest.hasNext()) {
            return false;
        }
        evict(oldest.next());
        return true;
    }

    /** Takes {@code conn} out of the books at once (so the room is there now) and closes its channel. */
    private void evict(Conn conn) {
        remove(conn);
        evicted.incrementAndGet();
        conn.channel.close();
    }

    /** Takes {@code conn} out of every count and set, once. Guarded by this. */
    private void remove(Conn conn) {
        if (conn.gone) {
            return;
        }
        conn.gone = true;
        open--;
        leaveState(conn);
        if (!conn.trusted) {
            untrusted--;
            conn.peer.open--;
        }
        conn.peer.stalled.remove(conn);
        if (conn.peer.open == 0 && conn.peer.stalled.isEmpty()) {
            peers.remove(conn.peer.address);
        }
        if (conn.deadline != null) {
            conn.deadline.cancel(false);
        }
    }

    private void leaveState(Conn conn) {
        if (conn.state == State.HEAD) {
            conn.peer.head.remove(conn);
            untrustedHead.remove(conn);
        } else if (conn.state == State.IDLE) {
            conn.peer.idle.remove(conn);
            untrustedIdle.remove(conn);
            trustedIdle.remove(conn);
        }
    }

    private void closed(Conn conn) {
        synchronized (this) {
            remove(conn);
        }
    }

    /** The request's head has arrived: the connection is serving it. */
    synchronized void headReceived(Conn conn) {
        if (conn.gone || conn.state != State.HEAD) {
            return;
        }
        leaveState(conn);
        conn.state = State.SERVING;
        if (conn.deadline != null) {
            conn.deadline.cancel(false);
            conn.deadline = null;
        }
    }

    /** The answer has been written to its end: the connection waits for its next request. */
    synchronized void answered(Conn conn) {
        if (conn.gone || conn.state != State.SERVING) {
            return;
        }
        conn.state = State.IDLE;
        conn.since = nanoClock.getAsLong();
        if (conn.trusted) {
            trustedIdle.add(conn);
        } else {
            conn.peer.idle.add(conn);
            untrustedIdle.add(conn);
        }
    }

    /** Bytes arrived: on an idle connection they start its next request's head. */
    void bytesArrived(Conn conn) {
        synchronized (this) {
            if (conn.gone || conn.state != State.IDLE) {
                return;
            }
            leaveState(conn);
            conn.state = State.HEAD;
            conn.since = nanoClock.getAsLong();
            if (!conn.trusted) {
                conn.peer.head.add(conn);
                untrustedHead.add(conn);
            }
        }
        headerDeadline(conn);
    }

    private void trusted(Conn conn) {
        if (!trustsSigned) {
            return;
        }
        synchronized (this) {
            if (conn.gone || conn.trusted) {
                return;
            }
            leaveState(conn);
            conn.trusted = true;
            untrusted--;
            conn.peer.open--;
            conn.peer.stalled.remove(conn);
            if (conn.state == State.IDLE) {
                trustedIdle.add(conn);
            }
        }
    }

    private void headerDeadline(Conn conn) {
        long generation;
        synchronized (this) {
            generation = ++conn.generation;
        }
        ScheduledFuture<?> deadline = conn.channel.eventLoop().schedule(() -> headerExpired(conn, generation),
                limits.headerTimeout().toNanos(), TimeUnit.NANOSECONDS);
        synchronized (this) {
            if (conn.gone || conn.generation != generation) {
                deadline.cancel(false);
            } else {
                conn.deadline = deadline;
            }
        }
    }

    private void headerExpired(Conn conn, long generation) {
        synchronized (this) {
            if (conn.gone || conn.state != State.HEAD || conn.generation != generation) {
                return;
            }
            remove(conn);
        }
        headerTimeouts.incrementAndGet();
        conn.channel.close();
    }

    /** The channel's writability changed: a connection that cannot take more of its answer is stalled. */
    void writability(Conn conn, boolean writable) {
        Conn longest = null;
        long generation;
        synchronized (this) {
            if (conn.gone) {
                return;
            }
            if (writable) {
                conn.stalledSince = -1;
                conn.peer.stalled.remove(conn);
                return;
            }
            if (conn.stalledSince >= 0) {
                return;
            }
            conn.stalledSince = nanoClock.getAsLong();
            generation = ++conn.stallGeneration;
            if (!conn.trusted) {
                conn.peer.stalled.add(conn);
                if (conn.peer.stalled.size() > limits.maxStalledPerAddress()) {
                    longest = conn.peer.stalled.iterator().next();
                    remove(longest);
                }
            }
        }
        if (longest != null) {
            writeStalls.incrementAndGet();
            longest.channel.close();
        }
        conn.channel.eventLoop().schedule(() -> stallExpired(conn, generation), limits.writeTimeout().toNanos(),
                TimeUnit.NANOSECONDS);
    }

    private void stallExpired(Conn conn, long generation) {
        synchronized (this) {
            if (conn.gone || conn.stalledSince < 0 || conn.stallGeneration != generation) {
                return;
            }
            remove(conn);
        }
        writeStalls.incrementAndGet();
        conn.channel.close();
    }

    /** Connections open now. */
    public synchronized int open() {
        return open;
    }

    /** Connections open now that are not trusted. */
    public synchronized int untrusted() {
        return untrusted;
    }

    /** New connections closed at once because no room could be made for them. */
    public long refused() {
        return refused.get();
    }

    /** Connections closed to make room for a new one. */
    public long evicted() {
        return evicted.get();
    }

    /** Connections closed because their request's head did not arrive within the header timeout. */
    public long headerTimeouts() {
        return headerTimeouts.get();
    }

    /** Connections closed because their client did not read their answer. */
    public long writeStalls() {
        return writeStalls.get();
    }

    /** One client address's untrusted connections. */
    private static final class Peer {
        final InetAddress address;
        final LinkedHashSet<Conn> head = new LinkedHashSet<>();
        final LinkedHashSet<Conn> idle = new LinkedHashSet<>();
        final LinkedHashSet<Conn> stalled = new LinkedHashSet<>();
        int open;

        Peer(InetAddress address) {
            this.address = address;
        }
    }

    /** One connection's state; its fields are guarded by its guard's lock. */
    static final class Conn {
        final ConnectionGuard owner;
        final Channel channel;
        final Peer peer;
        State state = State.HEAD;
        boolean trusted;
        boolean gone;
        long since;
        long generation;
        long stalledSince = -1;
        long stallGeneration;
        ScheduledFuture<?> deadline;
        /** Set from the answer's thread; read on the channel's event loop. */
        volatile boolean linger;
        /** On the channel's event loop: the connection drops what it reads. */
        boolean dropping;
        /** On the channel's event loop: the connection's lingering close has begun. */
        boolean closing;

        Conn(ConnectionGuard owner, Channel channel, Peer peer, long since) {
            this.owner = owner;
            this.channel = channel;
            this.peer = peer;
            this.since = since;
        }

        ConnectionGuard guard() {
            return owner;
        }
    }
}
