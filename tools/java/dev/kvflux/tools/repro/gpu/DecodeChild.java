package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.tools.repro.ReproGeometry;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntFunction;

/**
 * The GPU reproducers' decode process: {@link #main} is the one entry point besides {@code kvflux} itself,
 * started by prefill with {@link #connect} (the same java, class path and library settings), and serves
 * decode's side of a {@link Engine#MORI MoRI} or a {@link Engine#GPU GpuCopyEngine} pair.
 *
 * <pre>DecodeChild --engine mori|gpu --runtime cuda|hip --port P --gpu 1 --layers 118 --blocks 128 --block-bytes 32768</pre>
 */
public final class DecodeChild {
    /** System properties the child inherits: where the GPU runtime and MoRI libraries are. */
    private static final List<String> INHERITED = List.of(GpuRuntime.LIBRARY_PROPERTY, "kvflux.mori.lib");

    /** How long the child has to connect, and then to answer each read on the channel: 2 minutes. */
    static final int ANSWER_MS = 120_000;

    private DecodeChild() {
    }

    /** Which engine decode's side runs. */
    enum Engine {
        /** MoRI IO's own engine ({@link MoriDecode}). */
        MORI,
        /** kvflux's {@link dev.kvflux.bindings.gpu.GpuCopyEngine} ({@link GpuDecode}). */
        GPU;

        String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** What prefill tells its decode child: the engine, the runtime, decode's GPU, the geometry, the port to call. */
    record Args(Engine engine, GpuPlatform platform, int gpu, ReproGeometry geometry, int port) {

        List<String> toList() {
            return List.of("--engine", engine.label(), "--runtime", platform.prefix(), "--port", Integer.toString(port),
                    "--gpu", Integer.toString(gpu), "--layers", Integer.toString(geometry.layers()),
                    "--blocks", Integer.toString(geometry.blocks()), "--block-bytes", Long.toString(geometry.blockBytes()));
        }

        /** @throws IllegalArgumentException naming what is missing or wrong */
        static Args parse(String[] args) {
            Map<String, String> o = new HashMap<>();
            for (int i = 0; i < args.length; i += 2) {
                if (i + 1 >= args.length || !args[i].startsWith("--")) {
                    throw new IllegalArgumentException("arguments come in pairs --name value; got "
                            + String.join(" ", args));
                }
                o.put(args[i], args[i + 1]);
            }
            try {
                return new Args(Engine.valueOf(required(o, "--engine").toUpperCase(Locale.ROOT)),
                        GpuPlatform.named(required(o, "--runtime")), Integer.parseInt(required(o, "--gpu")),
                        new ReproGeometry(Integer.parseInt(required(o, "--layers")),
                                Integer.parseInt(required(o, "--blocks")), Long.parseLong(required(o, "--block-bytes"))),
                        Integer.parseInt(required(o, "--port")));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("a number was expected: " + e.getMessage());
            }
        }

        private static String required(Map<String, String> options, String name) {
            String value = options.get(name);
            if (value == null) {
                throw new IllegalArgumentException(name + " is required");
            }
            return value;
        }
    }

    /**
     * Serves decode's side until prefill is done, then exits 0, or {@value MoriDecode#EXIT_LEAKED} if MoRI
     * handles were left open, or 1 on an error (its message on stderr).
     */
    public static void main(String[] argv) {
        String who = "kvflux decode";
        int code;
        try {
            Args args = Args.parse(argv);
            who = args.engine().label() + " decode";
            code = switch (args.engine()) {
                case MORI -> MoriDecode.serve(args);
                case GPU -> GpuDecode.serve(args);
            };
        } catch (RuntimeException | IOException e) {
            System.out.flush();
            System.err.println(who + ": " + e.getMessage());
            code = 1;
        }
        System.exit(code);
    }

    /** What the parent reads from a child that has just connected, and keeps. */
    @FunctionalInterface
    interface Handshake<T> {
        T accept(Process child, ControlChannel channel) throws IOException;
    }

    /** Starts this class's {@link #main} with {@code args} of the port it is to call, as {@link #connect(Class, IntFunction, Handshake)}. */
    static <T> T connect(IntFunction<Args> args, Handshake<T> handshake) throws IOException {
        return connect(DecodeChild.class, port -> args.apply(port).toList(), handshake);
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
                "--sun-misc-unsafe-memory-access=allow",
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
