package dev.kvflux.tools.chaos;

import dev.kvflux.serving.api.Instance;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A loopback relay in front of a role's notify port that mistreats the notify channel's frames (a 4-byte
 * big-endian length, then the payload) on their way in, and passes the acknowledgements back:
 * {@link Mode#LOSE} drops every {@code every}-th frame and cuts its connection, as a network failure
 * would on TCP (frames already written on it may be lost too; the sender resends what was not
 * acknowledged),
 * {@link Mode#DUPLICATE} delivers every {@code every}-th frame twice (and swallows the second
 * acknowledgement, so that only the receiver sees the duplicate), {@link Mode#DELAY} holds every frame for
 * up to {@code every} milliseconds, in order, {@link Mode#REORDER} holds every {@code every}-th frame and
 * delivers it after the next one (or after {@value #REORDER_HOLD_MS} ms if no next one comes), so that the
 * receiver sees the pair swapped; their acknowledgements go back to the sender in its sending order, as
 * the sender's own connection (TCP) would never reorder them, so that what is tried is the receiver's
 * handling of notices out of order. One platform thread per direction per connection; for chaos
 * runs only, not a production component: it trusts the lengths it reads (up to 1 MiB).
 */
final class NotifyRelay implements AutoCloseable {
    /** How the relay mistreats frames. */
    enum Mode { LOSE, DUPLICATE, DELAY, REORDER }

    private static final int MAX_FRAME = 1 << 20;
    /** How long {@link Mode#REORDER} holds a frame waiting for one to swap it with. */
    static final int REORDER_HOLD_MS = 20;

    /** What the relay does with the acknowledgement of each frame it delivered, in delivery order. */
    private enum Ack {
        /** Pass it on. */
        PASS,
        /** Drop it (a duplicate's). */
        SWALLOW,
        /** Keep it until the next one (the later frame of a swapped pair, delivered first). */
        HOLD,
        /** Pass it on, then the one kept (the earlier frame of a swapped pair, delivered second). */
        PASS_THEN_HELD
    }

    private final ServerSocket server;
    private final int targetPort;
    private final Mode mode;
    private final int every;
    private final AtomicLong frames = new AtomicLong();
    private final AtomicLong mistreated = new AtomicLong();

    NotifyRelay(int targetPort, Mode mode, int every) throws IOException {
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.targetPort = targetPort;
        this.mode = mode;
        this.every = every;
        Thread.ofPlatform().daemon().name("kvflux-relay-accept").start(this::accept);
    }

    int port() {
        return server.getLocalPort();
    }

    /** Frames dropped, duplicated, delayed or held back so far. */
    long mistreated() {
        return mistreated.get();
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket client = server.accept();
                Socket target = new Socket(InetAddress.getLoopbackAddress(), targetPort);
                Queue<Ack> acks = new ConcurrentLinkedQueue<>();
                Thread.ofPlatform().daemon().name("kvflux-relay-in").start(() -> inbound(client, target, acks));
                Thread.ofPlatform().daemon().name("kvflux-relay-out").start(() -> outbound(target, client, acks));
            } catch (IOException e) {
                // the relay is closed, or the role is down (its connection is refused): the sender retries
            }
        }
    }

    /** Sender to role: frames, mistreated. */
    private void inbound(Socket from, Socket to, Queue<Ack> acks) {
        try (from; to) {
            DataInputStream in = new DataInputStream(from.getInputStream());
            DataOutputStream out = new DataOutputStream(to.getOutputStream());
            // REORDER's held frame; writes to out happen under its lock
            AtomicReference<byte[]> held = new AtomicReference<>();
            for (byte[] payload = read(in); payload != null; payload = read(in)) {
                boolean chosen = frames.incrementAndGet() % every == 0;
                switch (mode) {
                    case LOSE -> {
                        if (chosen) {
                            mistreated.incrementAndGet();
                            return;
                        }
                    }
                    case DUPLICATE -> {
                        if (chosen) {
                            mistreated.incrementAndGet();
                            acks.add(Ack.PASS);
                            write(out, payload);
                            acks.add(Ack.SWALLOW);
                        } else {
                            acks.add(Ack.PASS);
                        }
                    }
                    case DELAY -> {
                        mistreated.incrementAndGet();
                        Thread.sleep(ThreadLocalRandom.current().nextInt(every + 1));
                    }
                    case REORDER -> {
                        synchronized (held) {
                            byte[] before = held.getAndSet(null);
                            if (before != null) {
                                // the held frame goes after this one
                                acks.add(Ack.HOLD);
                                write(out, payload);
                                acks.add(Ack.PASS_THEN_HELD);
                                write(out, before);
                                continue;
                            }
                            if (chosen) {
                                mistreated.incrementAndGet();
                                byte[] hold = payload;
                                held.set(hold);
                                Thread.ofVirtual().start(() -> releaseLater(held, hold, out, acks));
                                continue;
                            }
                            acks.add(Ack.PASS);
                        }
                    }
                }
                synchronized (held) {
                    write(out, payload);
                }
            }
        } catch (IOException | InterruptedException e) {
            // a side closed: so does the other
        }
    }

    /** Delivers {@code payload} if it is still held once {@link #REORDER_HOLD_MS} have passed. */
    private static void releaseLater(AtomicReference<byte[]> held, byte[] payload, DataOutputStream out,
                                     Queue<Ack> acks) {
        try {
            Thread.sleep(REORDER_HOLD_MS);
            synchronized (held) {
                if (held.compareAndSet(payload, null)) {
                    acks.add(Ack.PASS);
                    write(out, payload);
                }
            }
        } catch (IOException | InterruptedException e) {
            // the connection closed with the frame held: lost with it, as LOSE's are
        }
    }

    /** Role to sender: acknowledgements, less those of duplicates, in the order the frames were sent. */
    private void outbound(Socket from, Socket to, Queue<Ack> acks) {
        try (from; to) {
            DataInputStream in = new DataInputStream(from.getInputStream());
            DataOutputStream out = new DataOutputStream(to.getOutputStream());
            byte[] kept = null;
            for (byte[] payload = read(in); payload != null; payload = read(in)) {
                Ack ack = acks.poll();
                if (ack == Ack.HOLD) {
                    kept = payload;
                } else if (ack != Ack.SWALLOW) {
                    write(out, payload);
                    if (ack == Ack.PASS_THEN_HELD && kept != null) {
                        write(out, kept);
                        kept = null;
                    }
                }
            }
        } catch (IOException e) {
            // a side closed: so does the other
        }
    }

    /** The next frame's payload; null on a length this relay does not pass. */
    private static byte[] read(DataInputStream in) throws IOException {
        int length = in.readInt();
        return length < 0 || length > MAX_FRAME ? null : in.readNBytes(length);
    }

    private static void write(DataOutputStream out, byte[] payload) throws IOException {
        out.writeInt(payload.length);
        out.write(payload);
        out.flush();
    }

    @Override
    public void close() throws IOException {
        server.close();
    }

    /** {@code instance} as the proxy is told of it: its last rank's notify address behind a new relay. */
    static Instance relayed(Instance instance, ChaosFault.Relay relay, List<NotifyRelay> relays)
            throws IOException {
        List<InetSocketAddress> ranks = new ArrayList<>(instance.notifyRanks());
        NotifyRelay before = new NotifyRelay(ranks.getLast().getPort(), relay.mode(), relay.every());
        relays.add(before);
        ranks.set(ranks.size() - 1, InetSocketAddress.createUnresolved("127.0.0.1", before.port()));
        return new Instance(instance.role(), instance.httpAddress(), ranks.getFirst(), ranks);
    }
}
