package dev.kvflux.serving.vllm;

import java.io.IOException;
import java.time.Duration;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Registers an instance with a vLLM-style proxy's discovery port as vLLM's MoRIIO connector does: a ZeroMQ DEALER
 * that sends the instance's registration, one msgpack map in the connector's shape ({@code type},
 * {@code http_address}, {@code zmq_address}, {@code dp_size}, {@code tp_size}, {@code transfer_mode}), now and every
 * interval, each send bounded by 1 s. The proxy it registers with may be vLLM's own or kvflux's
 * ({@code kvflux proxy --vllm-discovery}). Closing it stops the pings; the proxy drops the instance when they stop.
 */
public final class VllmPinger implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(VllmPinger.class);
    /** How often vLLM's connector registers. */
    public static final Duration INTERVAL = Duration.ofSeconds(3);

    private final String proxy;
    private final ScheduledExecutorService timer;
    private final byte[] registration;
    /**
     * The process's one ZeroMQ context for pingers: JeroMQ sometimes left one of two sockets made at once in contexts
     * of their own unconnected for seconds. Its sockets are each made, used and closed on their pinger's thread.
     */
    private static ZContext shared;
    private ZMQ.Socket dealer;
    private long failures;

    private VllmPinger(String proxy, ScheduledExecutorService timer, byte[] registration) {
        this.proxy = proxy;
        this.timer = timer;
        this.registration = registration;
    }

    /**
     * Starts pinging {@code proxy} ({@code host:port} of its discovery port) with {@code registration}, every
     * {@code interval}.
     */
    public static VllmPinger start(String proxy, VllmRegistration registration, Duration interval) {
        Objects.requireNonNull(proxy, "proxy");
        byte[] bytes = encode(registration);
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("kvflux-vllm-pinger").factory());
        VllmPinger pinger = new VllmPinger(proxy, timer, bytes);
        timer.scheduleWithFixedDelay(pinger::ping, 0, interval.toMillis(), TimeUnit.MILLISECONDS);
        LOG.info("registering with the vLLM proxy at tcp://{} every {} ms as {}", proxy, interval.toMillis(),
                registration);
        return pinger;
    }

    /** The registration's msgpack map, in the shape of vLLM's connector. */
    public static byte[] encode(VllmRegistration registration) {
        try (MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
            out.packMapHeader(6);
            out.packString("type").packString(registration.role() == dev.kvflux.serving.api.Role.PREFILL ? "P" : "D");
            out.packString("http_address").packString(registration.httpHostPort());
            out.packString("zmq_address").packString(registration.zmqAddress());
            out.packString("dp_size").packInt(registration.dpSize());
            out.packString("tp_size").packInt(registration.tpSize());
            out.packString("transfer_mode").packString(registration.mode().wireName().toUpperCase(Locale.ROOT));
            return out.toByteArray();
        } catch (IOException e) {
            throw new IllegalStateException("a registration did not encode", e);
        }
    }

    /** One ping, on the timer's thread; a socket that could not send three times in a row is made anew. */
    private void ping() {
        try {
            if (dealer == null) {
                dealer = context().createSocket(SocketType.DEALER);
                dealer.setLinger(0);
                dealer.setSendTimeOut(1_000);
                dealer.setSndHWM(4);
                dealer.setImmediate(true);
                dealer.connect("tcp://" + proxy);
            }
            if (dealer.send(registration, 0)) {
                failures = 0;
                return;
            }
            if (failures++ % 20 == 0) {
                LOG.warn("could not send a registration to the vLLM proxy at tcp://{} within 1 s ({} in a row); still"
                        + " trying", proxy, failures);
            }
            if (failures % 3 == 0) {
                closeSocket();
            }
        } catch (RuntimeException e) {
            LOG.warn("registration to the vLLM proxy at tcp://{} failed: {}", proxy, e.toString());
            closeSocket();
        }
    }

    private static synchronized ZContext context() {
        if (shared == null) {
            shared = new ZContext(1);
        }
        return shared;
    }

    private void closeSocket() {
        if (dealer != null) {
            context().destroySocket(dealer);
        }
        dealer = null;
    }

    @Override
    public void close() {
        try {
            timer.submit(this::closeSocket).get(2, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException
                | java.util.concurrent.RejectedExecutionException e) {
            LOG.debug("closing the vLLM pinger: {}", e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        timer.shutdownNow();
    }
}
