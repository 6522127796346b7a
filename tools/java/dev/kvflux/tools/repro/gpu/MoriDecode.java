package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MoriIo;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.Socket;

/**
 * The decode process of {@code kvflux repro --backend mori --processes 2}, started by prefill
 * ({@link MoriDecodeSide#child}) through {@link DecodeChild}: registers a zeroed buffer on its GPU with its
 * own MoRI engine, sends the engine's and the buffer's packed descriptors to prefill over loopback TCP,
 * takes prefill's engine descriptor, then checks its bytes whenever prefill asks, until prefill is done. It
 * then closes its engine and buffer and returns 0, or {@value #EXIT_LEAKED} if MoRI handles were left open.
 */
final class MoriDecode {
    /** The exit code when MoRI handles were still open after closing the engine. */
    static final int EXIT_LEAKED = 3;

    private MoriDecode() {
    }

    static int serve(DecodeChild.Args args) throws IOException {
        MoriIo io = MoriIo.mori();
        GpuRuntime runtime = GpuRuntimes.load(args.platform());
        try (Arena arena = Arena.ofShared();
                ControlChannel channel = new ControlChannel(new Socket(InetAddress.getLoopbackAddress(), args.port()))) {
            try (MoriDecodeSide.Registered decode = new MoriDecodeSide.Registered(runtime, args.geometry(), args.gpu())) {
                channel.sendDescriptor(decode.engine.exportEngine());
                channel.sendDescriptor(decode.engine.exportMemory(decode.region));
                decode.engine.importEngine(channel.receiveDescriptor());
                ByteVerifier.serve(channel, runtime, decode.buffer, args.geometry(), arena);
            }
        }
        long open = io.liveHandles().orElse(-1);
        System.err.println("mori decode: MoRI handles open after closing the engine: " + open);
        return open == 0 ? 0 : EXIT_LEAKED;
    }
}
