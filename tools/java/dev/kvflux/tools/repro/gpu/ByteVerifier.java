package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.tools.repro.ReproGeometry;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Decode's check of the bytes it received, on a host copy of its buffer: every byte of every block must
 * hold the request's fill value for that block, and every byte between blocks must still be 0.
 */
final class ByteVerifier {
    private final ReproGeometry layout;
    private final MemorySegment patterns;
    private final MemorySegment zeros;

    ByteVerifier(ReproGeometry layout, Arena arena) {
        this.layout = layout;
        long block = layout.blockBytes();
        this.patterns = arena.allocate(256 * block);
        for (int v = 0; v < 256; v++) {
            patterns.asSlice(v * block, block).fill((byte) v);
        }
        this.zeros = arena.allocate(block);
    }

    /**
     * The byte every position of block {@code block} of {@code layer} holds in request {@code request},
     * as prefill fills it: never 0 (the gaps' value), and differing between neighbouring blocks, layers
     * and requests.
     */
    static int fill(long request, int layer, int block) {
        long h = request * 0x9E3779B97F4A7C15L + layer * 0xC2B2AE3D27D4EB4FL + block * 0x165667B19E3779F9L;
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        h ^= h >>> 32;
        int v = (int) (h & 0xFF);
        return v == 0 ? 1 : v;
    }

    /** Mismatched bytes and the layers holding any, for request {@code request}. */
    record Result(long checkedBytes, long mismatchedBytes, int badLayers) {
    }

    /**
     * Decode's side of the control link: for each request prefill names, copies {@code buffer} to the host
     * and answers with what {@link #check} found, until prefill says it is done. Runs on the calling thread.
     */
    static void serve(ControlChannel channel, GpuRuntime runtime, DeviceBuffer buffer, ReproGeometry layout,
            Arena arena) throws IOException {
        MemorySegment host = arena.allocate(layout.regionBytes(), 4096);
        ByteVerifier verifier = new ByteVerifier(layout, arena);
        while (true) {
            ControlChannel.Command command = channel.receiveCommand();
            if (command.done()) {
                return;
            }
            long start = System.nanoTime();
            runtime.setDevice(buffer.device());
            runtime.copyToHost(buffer.address(), host);
            double copyBackMs = (System.nanoTime() - start) / 1e6;
            Result r = verifier.check(host, command.request());
            channel.sendVerdict(new ControlChannel.Verdict(command.request(), r.checkedBytes(), r.mismatchedBytes(),
                    r.badLayers(), copyBackMs));
        }
    }

    Result check(MemorySegment host, long request) {
        long block = layout.blockBytes();
        long mismatched = 0;
        int badLayers = 0;
        for (int l = 0; l < layout.layers(); l++) {
            long layerMismatches = 0;
            for (int b = 0; b < layout.blocks(); b++) {
                long at = layout.offset(l, b);
                int v = ByteVerifier.fill(request, l, b);
                layerMismatches += count(host, at, patterns, v * block, block);
                layerMismatches += count(host, at + block, zeros, 0, block);
            }
            if (layerMismatches > 0) {
                badLayers++;
                mismatched += layerMismatches;
            }
        }
        return new Result(layout.regionBytes(), mismatched, badLayers);
    }

    private static long count(MemorySegment host, long at, MemorySegment expected, long from, long size) {
        long first = MemorySegment.mismatch(host, at, at + size, expected, from, from + size);
        if (first < 0) {
            return 0;
        }
        long n = 0;
        for (long i = first; i < size; i++) {
            if (host.get(java.lang.foreign.ValueLayout.JAVA_BYTE, at + i)
                    != expected.get(java.lang.foreign.ValueLayout.JAVA_BYTE, from + i)) {
                n++;
            }
        }
        return n;
    }
}
