package dev.kvflux.tools.bench;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A slowloris: {@code connections} connections to one HTTP port, each sending a request head one byte a second that
 * never ends ({@code POST /v1/completions HTTP/1.1}, then headers for ever), each opened again as soon as the server
 * closes it, all from one source address. One thread and one selector hold them all as non-blocking sockets. It
 * counts what the server did with them: closes, the status lines it sent first (a 408, say), connections that could
 * not be opened; and samples every second how many it holds connected.
 */
final class Slowloris implements AutoCloseable {
    private static final byte[] HEAD = ("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Content-Type: application/json\r\n").getBytes(StandardCharsets.US_ASCII);

    /** One connection: its channel and how many bytes of its never-ending head it has sent. */
    private static final class Conn {
        final SocketChannel channel;
        long sent;
        boolean connected;
        final StringBuilder answer = new StringBuilder();

        Conn(SocketChannel channel) {
            this.channel = channel;
        }
    }

    private final InetSocketAddress target;
    private final InetSocketAddress source;
    private final int connections;
    private final Selector selector;
    private final Thread thread;
    /** The connections open or opening, by identity: thousands come and go each second when the server closes them. */
    private final java.util.Set<Conn> open = new java.util.HashSet<>();
    private final Map<String, Long> answers = new TreeMap<>();
    private final Map<String, Long> openFailures = new TreeMap<>();
    private final List<Integer> heldSamples = new ArrayList<>();
    private long opened;
    private long closedByServer;
    private long bytesSent;
    private int toOpen;
    private volatile boolean running = true;

    private Slowloris(InetSocketAddress target, String sourceAddress, int connections) throws IOException {
        this.target = target;
        this.source = new InetSocketAddress(sourceAddress, 0);
        this.connections = connections;
        this.selector = Selector.open();
        this.toOpen = connections;
        this.thread = Thread.ofPlatform().daemon().name("kvflux-slowloris").unstarted(this::loop);
    }

    /** Starts holding {@code connections} connections to {@code target} from {@code sourceAddress}. */
    static Slowloris start(InetSocketAddress target, String sourceAddress, int connections) throws IOException {
        Slowloris slowloris = new Slowloris(target, sourceAddress, connections);
        slowloris.thread.start();
        return slowloris;
    }

    /** The {@code n}th byte of the head: the request line and two headers, then {@code X-Slow-N: N} for ever. */
    static byte headByte(long n) {
        if (n < HEAD.length) {
            return HEAD[(int) n];
        }
        byte[] header = "X-Slow: 0123456789abcdef\r\n".getBytes(StandardCharsets.US_ASCII);
        return header[(int) ((n - HEAD.length) % header.length)];
    }

    private void loop() {
        ByteBuffer read = ByteBuffer.allocate(4096);
        ByteBuffer one = ByteBuffer.allocate(1);
        long nextDrip = System.nanoTime() + 1_000_000_000L;
        try {
            while (running) {
                openPending();
                long wait = Math.max(1, (nextDrip - System.nanoTime()) / 1_000_000);
                selector.select(Math.min(wait, 100));
                for (SelectionKey key : selector.selectedKeys()) {
                    Conn conn = (Conn) key.attachment();
                    if (key.isValid() && key.isConnectable()) {
                        finishConnect(key, conn);
                    } else if (key.isValid() && key.isReadable()) {
                        readFrom(conn, read);
                    }
                }
                selector.selectedKeys().clear();
                if (System.nanoTime() - nextDrip >= 0) {
                    nextDrip += 1_000_000_000L;
                    drip(one);
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            if (running) {
                openFailures.merge("selector: " + e, 1L, Long::sum);
            }
        }
    }

    /** Opens the connections still to open; one that cannot be opened now is tried again on the next round. */
    private void openPending() {
        int failed = 0;
        while (toOpen > 0) {
            toOpen--;
            SocketChannel channel = null;
            try {
                channel = SocketChannel.open();
                channel.configureBlocking(false);
                channel.bind(source);
                Conn conn = new Conn(channel);
                if (channel.connect(target)) {
                    conn.connected = true;
                    channel.register(selector, SelectionKey.OP_READ, conn);
                } else {
                    channel.register(selector, SelectionKey.OP_CONNECT, conn);
                }
                open.add(conn);
                opened++;
            } catch (IOException e) {
                close(channel);
                openFailures.merge(e.getClass().getSimpleName() + ": " + e.getMessage(), 1L, Long::sum);
                failed++;
            }
        }
        toOpen += failed;
    }

    private void finishConnect(SelectionKey key, Conn conn) {
        try {
            if (conn.channel.finishConnect()) {
                conn.connected = true;
                key.interestOps(SelectionKey.OP_READ);
            }
        } catch (IOException e) {
            openFailures.merge("connect: " + e.getMessage(), 1L, Long::sum);
            lost(conn, false);
        }
    }

    private void readFrom(Conn conn, ByteBuffer read) {
        try {
            read.clear();
            int n = conn.channel.read(read);
            if (n > 0 && conn.answer.length() < 64) {
                conn.answer.append(new String(read.array(), 0, n, StandardCharsets.ISO_8859_1));
            }
            if (n < 0) {
                lost(conn, true);
            }
        } catch (IOException e) {
            lost(conn, true);
        }
    }

    /** One more byte of every connected connection's head; a write that fails is the server's close. */
    private void drip(ByteBuffer one) {
        int held = 0;
        for (Conn conn : List.copyOf(open)) {
            if (!conn.connected) {
                continue;
            }
            try {
                one.clear();
                one.put(headByte(conn.sent)).flip();
                if (conn.channel.write(one) == 1) {
                    conn.sent++;
                    bytesSent++;
                }
                held++;
            } catch (IOException e) {
                lost(conn, true);
            }
        }
        heldSamples.add(held);
    }

    /** {@code conn} is gone (the server closed it, or it never connected): counted, and opened again. */
    private void lost(Conn conn, boolean byServer) {
        if (byServer) {
            closedByServer++;
            String first = conn.answer.toString();
            answers.merge(first.startsWith("HTTP/1.") && first.length() >= 12 ? first.substring(9, 12) : "none",
                    1L, Long::sum);
        }
        close(conn.channel);
        open.remove(conn);
        if (running) {
            toOpen++;
        }
    }

    private static void close(SocketChannel channel) {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // closing a broken connection
            }
        }
    }

    /**
     * Stops, closes every connection, and returns what happened: connections opened in all, closed by the server
     * (and by what it answered first: a status, or {@code none}), failures to open one, and how many were held
     * connected, sampled each second from the {@code rampSeconds}th second on (the ones before are the opening).
     */
    Map<String, Object> stop(int rampSeconds) throws InterruptedException {
        running = false;
        thread.join(5_000);
        try {
            selector.close();
        } catch (IOException ignored) {
            // the figures are taken anyway
        }
        for (Conn conn : open) {
            close(conn.channel);
        }
        List<Integer> steady = heldSamples.size() > rampSeconds ? heldSamples.subList(rampSeconds, heldSamples.size())
                : heldSamples;
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("slowloris_connections", connections);
        figures.put("slowloris_opened_total", opened);
        figures.put("slowloris_closed_by_server", closedByServer);
        figures.put("slowloris_server_first_bytes", new TreeMap<>(answers));
        figures.put("slowloris_open_failures", new TreeMap<>(openFailures));
        figures.put("slowloris_held_min", steady.stream().mapToInt(Integer::intValue).min().orElse(0));
        figures.put("slowloris_held_max", steady.stream().mapToInt(Integer::intValue).max().orElse(0));
        figures.put("slowloris_bytes_sent", bytesSent);
        return figures;
    }

    @Override
    public void close() throws InterruptedException {
        if (running) {
            stop(0);
        }
    }
}
