package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MoriIo;
import dev.kvflux.tools.repro.ReproGeometry;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.Socket;
import java.util.HashMap;
import java.util.Map;

/**
 * The decode process of {@code kvflux repro --backend mori --processes 2}, started by prefill
 * ({@link MoriDecodeSide#child}): registers a zeroed buffer on its GPU with its own MoRI engine, sends the
 * engine's and the buffer's packed descriptors to prefill over loopback TCP, takes prefill's engine
 * descriptor, then checks its bytes whenever prefill asks, until prefill is done. It then closes its engine
 * and buffer and exits 0, or {@value #EXIT_LEAKED} if MoRI handles were left open, or 1 on an error.
 *
 * <pre>MoriDecode --port P --gpu 1 --layers 118 --blocks 128 --block-bytes 32768</pre>
 */
public final class MoriDecode {
    /** The exit code when MoRI handles were still open after closing the engine. */
    static final int EXIT_LEAKED = 3;

    private MoriDecode() {
    }

    public static void main(String[] args) {
        int code;
        try {
            code = run(parse(args));
        } catch (RuntimeException | java.io.IOException e) {
            System.err.println("mori decode: " + e.getMessage());
            code = 1;
        }
        System.exit(code);
    }

    private static int run(Map<String, String> o) throws java.io.IOException {
        int gpu = Integer.parseInt(o.getOrDefault("--gpu", "1"));
        ReproGeometry g = new ReproGeometry(Integer.parseInt(o.getOrDefault("--layers", "118")),
                Integer.parseInt(o.getOrDefault("--blocks", "128")), Long.parseLong(o.getOrDefault("--block-bytes", "32768")));
        int port = Integer.parseInt(required(o, "--port"));
        MoriIo io = MoriIo.mori();
        GpuRuntime runtime = GpuRuntime.load();
        try (Arena arena = Arena.ofShared();
                ControlChannel channel = new ControlChannel(new Socket(InetAddress.getLoopbackAddress(), port))) {
            try (MoriDecodeSide.Registered decode = new MoriDecodeSide.Registered(runtime, g, gpu)) {
                channel.sendDescriptor(decode.engine.exportEngine());
                channel.sendDescriptor(decode.engine.exportMemory(decode.region));
                decode.engine.importEngine(channel.receiveDescriptor());
                ByteVerifier.serve(channel, runtime, decode.buffer, g, arena);
            }
        }
        long open = io.liveHandles().orElse(-1);
        System.err.println("mori decode: MoRI handles open after closing the engine: " + open);
        return open == 0 ? 0 : EXIT_LEAKED;
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length || !args[i].startsWith("--")) {
                throw new IllegalArgumentException("arguments come in pairs --name value; got " + String.join(" ", args));
            }
            options.put(args[i], args[i + 1]);
        }
        return options;
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException(name + " is required");
        }
        return value;
    }
}
