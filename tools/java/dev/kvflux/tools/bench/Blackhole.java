package dev.kvflux.tools.bench;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A loopback server that accepts every connection and never answers or closes one, as an instance that hangs (or a
 * hostile one registered to swallow traffic) does. Closing it closes the connections it holds.
 */
public final class Blackhole implements AutoCloseable {
    private final ServerSocket socket;
    private final List<Socket> held = new CopyOnWriteArrayList<>();

    private Blackhole(ServerSocket socket) {
        this.socket = socket;
    }

    /** Listens on a free loopback port with room for {@code backlog} connections not yet accepted. */
    public static Blackhole open(int backlog) throws IOException {
        Blackhole hole = new Blackhole(new ServerSocket(0, backlog, InetAddress.getLoopbackAddress()));
        Thread.ofVirtual().name("kvflux-blackhole-" + hole.socket.getLocalPort()).start(hole::accept);
        return hole;
    }

    private void accept() {
        while (!socket.isClosed()) {
            try {
                held.add(socket.accept());
            } catch (IOException closed) {
                return;
            }
        }
    }

    /** Where it listens. */
    public InetSocketAddress address() {
        return new InetSocketAddress("127.0.0.1", socket.getLocalPort());
    }

    @Override
    public void close() throws IOException {
        socket.close();
        for (Socket s : held) {
            s.close();
        }
    }
}
