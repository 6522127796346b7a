package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuRuntime;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.Socket;

/**
 * The decode process of {@code kvflux repro --backend cuda} (or {@code hip}), started by {@link PrefillPair}:
 * registers a buffer on its GPU with a {@link GpuCopyEngine}, sends its descriptor (with the IPC handle) to
 * prefill over loopback TCP, then checks its bytes whenever prefill asks, until prefill is done.
 */
final class GpuDecode {
    private GpuDecode() {
    }

    static int serve(DecodeChild.Args args) throws IOException {
        GpuRuntime runtime = GpuRuntimes.load(args.platform());
        try (GpuCopyEngine engine = GpuCopyEngine.open(runtime, "decode", args.gpu(), new GpuCopyEngine.Config(1, 0));
                Arena arena = Arena.ofShared();
                ControlChannel channel = new ControlChannel(new Socket(InetAddress.getLoopbackAddress(), args.port()))) {
            MemoryRegion region = engine.registerMemory(args.geometry().regionBytes(), args.gpu());
            DeviceBuffer buffer = engine.buffer(region);
            channel.sendDescriptor(engine.describe(region).pack());
            ByteVerifier.serve(channel, runtime, buffer, args.geometry(), arena);
            return 0;
        }
    }
}
