package dev.kvflux.serving.vllm;

import dev.kvflux.transfer.notify.LogText;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import zmq.Msg;
import zmq.io.Metadata;

/**
 * The proxy's vLLM discovery port: a ZeroMQ ROUTER that vLLM's MoRIIO instances (and kvflux's roles started with
 * {@code --vllm-proxy}) send their registrations to, every 3 s, as one msgpack map a message
 * ({@link VllmRegistration}). One thread reads them and hands each to {@code onRegistration}, which says what became
 * of it (the word is counted).
 *
 * <p>Nothing in a registration can be authenticated, so a message is taken only from an address in the allowed
 * networks ({@link Networks#LOOPBACK} unless given); others are dropped and counted. A message is at most
 * {@value #MAX_MESSAGE_BYTES} bytes (ZeroMQ closes a peer that sends a larger one), at most 16 messages wait per peer,
 * and a malformed one (not a bounded flat msgpack map, a missing or wrong field) is dropped and counted, with one log
 * line per 10 s: a flood of bad frames costs a thread's time, never memory or service.
 */
public final class VllmDiscovery implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(VllmDiscovery.class);
    /** vLLM's default discovery port. */
    public static final int DEFAULT_PORT = 36367;
    /** The largest registration message taken. */
    public static final int MAX_MESSAGE_BYTES = 4096;
    private static final int MAX_FRAMES = 4;
    private static final long WARN_EVERY_NANOS = 10_000_000_000L;

    private final ZContext context;
    private final ZMQ.Socket router;
    private final Thread reader;
    private final int port;
    private final Networks allowed;
    private final Function<VllmRegistration, String> onRegistration;
    private final Map<String, AtomicLong> outcomes = new ConcurrentHashMap<>();
    private volatile boolean closing;
    private long lastWarning = Long.MIN_VALUE;

    private VllmDiscovery(ZContext context, ZMQ.Socket router, int port, Networks allowed,
            Function<VllmRegistration, String> onRegistration) {
        this.context = context;
        this.router = router;
        this.port = port;
        this.allowed = allowed;
        this.onRegistration = onRegistration;
        this.reader = Thread.ofPlatform().daemon().name("kvflux-vllm-discovery").unstarted(this::read);
    }

    /**
     * Binds {@code host:port} (0: a free port) and starts reading registrations from {@code allowed} networks.
     *
     * @throws IllegalStateException saying why, when the port cannot be bound
     */
    public static VllmDiscovery bind(String host, int port, Networks allowed,
            Function<VllmRegistration, String> onRegistration) {
        Objects.requireNonNull(allowed, "allowed");
        Objects.requireNonNull(onRegistration, "onRegistration");
        ZContext context = new ZContext(1);
        try {
            ZMQ.Socket router = context.createSocket(SocketType.ROUTER);
            router.setMaxMsgSize(MAX_MESSAGE_BYTES);
            router.setRcvHWM(16);
            router.setLinger(0);
            router.setReceiveTimeOut(200);
            String endpoint = "tcp://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + (port == 0 ? "*" : port);
            int bound;
            try {
                if (port == 0) {
                    bound = router.bindToRandomPort("tcp://" + (host.contains(":") ? "[" + host + "]" : host));
                } else {
                    router.bind(endpoint);
                    bound = port;
                }
            } catch (RuntimeException e) {
                throw new IllegalStateException("cannot bind the vLLM discovery port " + host + ":" + port + ": "
                        + e.getMessage() + " (in use, or not an address of this host?)", e);
            }
            VllmDiscovery discovery = new VllmDiscovery(context, router, bound, allowed, onRegistration);
            discovery.reader.start();
            LOG.info("vLLM discovery on tcp://{}:{}, registrations taken from {}", host, bound, allowed);
            return discovery;
        } catch (RuntimeException e) {
            context.close();
            throw e;
        }
    }

    /** The port registrations are taken on. */
    public int port() {
        return port;
    }

    private void read() {
        while (!closing) {
            Msg identity;
            try {
                identity = router.base().recv(0);
            } catch (RuntimeException e) {
                if (closing) {
                    return;
                }
                count("error");
                continue;
            }
            if (identity == null) {
                continue; // the receive timeout: look at the closing flag
            }
            Msg payload = null;
            int frames = 1;
            boolean more = identity.hasMore();
            while (more) {
                Msg frame = router.base().recv(0);
                if (frame == null) {
                    break;
                }
                frames++;
                if (frames == 2) {
                    payload = frame;
                }
                more = frame.hasMore();
            }
            handle(identity, payload, frames);
        }
    }

    private void handle(Msg identity, Msg payload, int frames) {
        // the ROUTER makes the identity frame itself: the peer's address travels on the frames the peer sent
        Metadata metadata = payload != null ? payload.getMetadata() : identity.getMetadata();
        String peer = metadata == null ? null : metadata.get(Metadata.PEER_ADDRESS);
        if (peer == null || !allowed.contains(host(peer))) {
            count("not_allowed");
            warn("dropped a vLLM registration from {}: not in the allowed networks {} (kvflux proxy --vllm-allow)",
                    peer, allowed);
            return;
        }
        if (payload == null || frames > MAX_FRAMES) {
            count("malformed");
            warn("dropped a vLLM registration from {}: {} frames, expected one msgpack map", peer, frames);
            return;
        }
        VllmRegistration registration;
        try {
            registration = VllmRegistration.from(MsgpackMaps.read(payload.data()));
        } catch (IllegalArgumentException e) {
            boolean greeting = e.getMessage() != null && e.getMessage().contains("\"role\"");
            count(greeting ? "greeting" : "malformed");
            if (!greeting) {
                warn("dropped a vLLM registration from {}: {}", peer, LogText.escape(e.getMessage()));
            }
            return;
        }
        String outcome;
        try {
            outcome = onRegistration.apply(registration);
        } catch (RuntimeException e) {
            outcome = "error";
            LOG.warn("handling vLLM registration {} failed: {}", registration, e.toString());
        }
        count(outcome);
    }

    /** The host of a ZeroMQ peer address ({@code tcp://1.2.3.4:5}, {@code 1.2.3.4:5} or {@code [::1]:5}). */
    static String host(String peer) {
        String address = peer.startsWith("tcp://") ? peer.substring(6) : peer;
        if (address.startsWith("[")) {
            int end = address.indexOf(']');
            return end > 0 ? address.substring(1, end) : address;
        }
        int colon = address.indexOf(':');
        return colon > 0 && colon == address.lastIndexOf(':') ? address.substring(0, colon) : address;
    }

    private void count(String outcome) {
        outcomes.computeIfAbsent(outcome, o -> new AtomicLong()).incrementAndGet();
    }

    /** Logs at most one line per 10 s; the rest are counted only. On the reader thread. */
    private void warn(String format, Object... args) {
        long now = System.nanoTime();
        if (lastWarning == Long.MIN_VALUE || now - lastWarning >= WARN_EVERY_NANOS) {
            lastWarning = now;
            LOG.warn(format + ". Later such lines are held to one per 10 s; every one is counted", args);
        }
    }

    /** Registrations seen so far that ended as {@code outcome} (registered, refreshed, malformed, not_allowed...). */
    public long outcome(String outcome) {
        AtomicLong n = outcomes.get(outcome);
        return n == null ? 0 : n.get();
    }

    /** Registrations seen so far, by what became of them. */
    public Map<String, Long> outcomes() {
        Map<String, Long> copy = new java.util.TreeMap<>();
        outcomes.forEach((k, v) -> copy.put(k, v.get()));
        return copy;
    }

    @Override
    public void close() {
        closing = true;
        try {
            reader.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        context.close();
    }
}
