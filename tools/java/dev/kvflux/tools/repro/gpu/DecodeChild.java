package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

/** Starts a reproducer's decode process: the same java, class path and library settings as this one. */
final class DecodeChild {
    /** System properties the child inherits: which GPU runtime and MoRI libraries to load. */
    private static final List<String> INHERITED = List.of(GpuRuntime.LIBRARY_PROPERTY, GpuRuntime.RUNTIME_PROPERTY,
            "kvflux.mori.lib");

    /** How long the child has to connect, and then to answer each read on the channel: 2 minutes. */
    static final int ANSWER_MS = 120_000;

    private DecodeChild() {
    }

    /** What the parent reads from a child that has just connected, and keeps. */
    @FunctionalInterface
    interface Handshake<T> {
        T accept(Process child, ControlChannel channel) throws IOException;
    }

    /**
     * Listens on a free loopback port, starts {@code main} with {@code args(port)}, waits for the child to
     * connect back, and returns what {@code handshake} makes of the child and its control channel. The
     * connection and every later read time out after {@link #ANSWER_MS}. If anything fails before
     * {@code handshake} returns, the channel is closed and the child killed.
     */
    static <T> T connect(Class<?> main, IntFunction<List<String>> args, Handshake<T> handshake) throws IOException {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            server.setSoTimeout(ANSWER_MS);
            Process child = start(main, args.apply(server.getLocalPort()));
            ControlChannel channel = null;
            try {
                Socket socket = server.accept();
                socket.setSoTimeout(ANSWER_MS);
                channel = new ControlChannel(socket);
                return handshake.accept(child, channel);
            } catch (IOException | RuntimeException e) {
                if (channel != null) {
                    channel.close();
                }
                child.destroyForcibly();
                throw e;
            }
        }
    }

    /** Runs {@code main} with {@code args} in a child JVM whose output goes to this process's. */
    static Process start(Class<?> main, List<String> args) throws IOException {
        String launcher = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>(List.of(launcher, "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path")));
        for (String property : INHERITED) {
            String value = System.getProperty(property);
            if (value != null) {
                command.add("-D" + property + "=" + value);
            }
        }
        command.add(main.getName());
        command.addAll(args);
        return new ProcessBuilder(command).inheritIO().start();
    }
}
