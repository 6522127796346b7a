package dev.kvflux.transfer.notify;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;

/**
 * Where a decode's KV lives, as its engine describes it to a prefill: the handshake MoRIIO makes before the first
 * write. Decode registers its KV region with its engine and sends this with every {@code remote_blocks}: the
 * engine's backend name, its packed engine descriptor (MoRI's {@code EngineDesc}), the region's packed memory
 * descriptor (MoRI's {@code MemoryDesc}, or the CUDA engine's, with the IPC handle), and the region's rows
 * ({@code rowBlocks} blocks of {@code blockBytes} per layer). Prefill registers the engine and opens one session
 * per decode incarnation from it; the frame that carries it is signed like every notify frame, and each
 * descriptor is at most {@value #MAX_DESCRIPTOR_BYTES} bytes.
 */
public record KvRegion(String backend, byte[] engineDescriptor, byte[] memoryDescriptor, long rowBlocks,
        long blockBytes) {
    /** Longest packed descriptor accepted, in bytes (MoRI's are about 100 and 200). */
    public static final int MAX_DESCRIPTOR_BYTES = 4096;
    /** Longest backend name accepted, in bytes. */
    public static final int MAX_BACKEND_BYTES = 32;

    public KvRegion {
        Objects.requireNonNull(backend, "backend");
        Objects.requireNonNull(engineDescriptor, "engineDescriptor");
        Objects.requireNonNull(memoryDescriptor, "memoryDescriptor");
        if (engineDescriptor.length > MAX_DESCRIPTOR_BYTES || memoryDescriptor.length > MAX_DESCRIPTOR_BYTES) {
            throw new IllegalArgumentException("a packed descriptor is at most " + MAX_DESCRIPTOR_BYTES + " bytes, got "
                    + Math.max(engineDescriptor.length, memoryDescriptor.length));
        }
        if (rowBlocks < 1 || blockBytes < 1) {
            throw new IllegalArgumentException("a KV region needs at least one block per row and one byte per block, got "
                    + rowBlocks + " and " + blockBytes);
        }
        engineDescriptor = engineDescriptor.clone();
        memoryDescriptor = memoryDescriptor.clone();
    }

    @Override
    public byte[] engineDescriptor() {
        return engineDescriptor.clone();
    }

    @Override
    public byte[] memoryDescriptor() {
        return memoryDescriptor.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KvRegion r && backend.equals(r.backend) && rowBlocks == r.rowBlocks
                && blockBytes == r.blockBytes && Arrays.equals(engineDescriptor, r.engineDescriptor)
                && Arrays.equals(memoryDescriptor, r.memoryDescriptor);
    }

    @Override
    public int hashCode() {
        return Objects.hash(backend, rowBlocks, blockBytes, Arrays.hashCode(engineDescriptor),
                Arrays.hashCode(memoryDescriptor));
    }

    @Override
    public String toString() {
        return "KvRegion[" + backend + ", rows of " + rowBlocks + " x " + blockBytes + " B, engine "
                + engineDescriptor.length + " B, memory " + memoryDescriptor.length + " B "
                + HexFormat.of().formatHex(memoryDescriptor, 0, Math.min(8, memoryDescriptor.length)) + "...]";
    }
}
