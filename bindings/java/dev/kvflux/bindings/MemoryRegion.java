package dev.kvflux.bindings;

import java.util.Objects;

/**
 * A memory range registered with a transfer engine: the engine that owns it, its id there, its size in
 * bytes and the device it lives on (-1 for host memory). The remote side of a session is a region that
 * the peer registered and sent over.
 */
public record MemoryRegion(String engineKey, int id, long size, int device) {
    public MemoryRegion {
        Objects.requireNonNull(engineKey, "engineKey");
        if (size <= 0) {
            throw new IllegalArgumentException("memory region size must be positive, got " + size);
        }
    }
}
