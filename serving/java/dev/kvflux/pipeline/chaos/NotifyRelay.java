package dev.kvflux.pipeline.chaos;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A loopback relay in front of a role's notify port that mistreats the notify channel's frames (a 4-byte
 * big-endian length, then the payload) on their way in, and passes the acknowledgements back:
 * {@link Mode#LOSE} drops every {@code every}-th frame and cuts its connection, as a network failure
 * would on TCP (frames already written on it may be lost too; the sender resends what was not
 * acknowledged),
 * {@link Mode#DUPLICATE} delivers every {@code every}-th frame twice (and swallows the second
 * acknowledgement, so that only the receiver sees the duplicate), {@link Mode#DELAY} holds every frame for
 * up to {@code every} milliseconds, in order. One platform thread per direction per connection; for chaos
 * runs only, not a production component: it trusts the lengths it reads (up to 1 MiB).
 */
final class NotifyRelay implements AutoCloseable {
    /** How the relay mistreats frames. */
    enum Mode { LOSE, DUPLICATE, DELAY }

    private static final int MAX_FRAME = 1 << 20;

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

    /** Frames dropped, duplicated or delayed so far. */
    long mistreated() {
        return mistreated.get();
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket client = server.accept();
                Socket target = new Socket(InetAddress.getLoopbackAddress(), targetPort);
                Queue<Boolean> swallow = new ConcurrentLinkedQueue<>();
                Thread.ofPlatform().daemon().name("kvflux-relay-in").start(() -> inbound(client, target, swallow));
                Thread.ofPlatform().daemon().name("kvflux-relay-out").start(() -> outbound(target, client, swallow));
            } catch (IOException e) {
                // the relay is closed, or the role is down (its connection is refused): the sender retries
            }
        }
    }

    /** Sender to role: frames, mistreated. */
    private void inbound(Socket from, Socket to, Queue<Boolean> swallow) {
        try (from; to) {
            DataInputStream in = new DataInputStream(from.getInputStream());
            DataOutputStream out = new DataOutputStream(to.getOutputStream());
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
                            swallow.add(false);
                            write(out, payload);
                            swallow.add(true);
                        } else {
                            swallow.add(false);
                        }
                    }
                    case DELAY -> {
                        mistreated.incrementAndGet();
                        Thread.sleep(ThreadLocalRandom.current().nextInt(every + 1));
                    }
                }
                write(out, payload);
            }
        } catch (IOException | InterruptedException e) {
            // a side closed: so does the other
        }
    }

    /** Role to sender: acknowledgements, less those of duplicates. */
    private void outbound(Socket from, Socket to, Queue<Boolean> swallow) {
        try (from; to) {
            DataInputStream in = new DataInputStream(from.getInputStream());
            DataOutputStream out = new DataOutputStream(to.getOutputStream());
            for (byte[] payload = read(in); payload != null; payload = read(in)) {
                if (!Boolean.TRUE.equals(swallow.poll())) {
                    write(out, payload);
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
}
