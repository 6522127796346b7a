package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.mori.internal.MoriNative;

/**
 * A memory descriptor handle: memory registered on an engine, or a peer's memory unpacked from its
 * packed {@code MemoryDesc}. Closing deregisters a registration (or drops an unpacked descriptor).
 */
public final class MoriMemory extends EngineHandle {
    private final boolean remote;
    private final MemoryRegion region;
    private final MemoryLocation location;

    MoriMemory(MoriNative lib, MoriEngine engine, long handle, String engineKey, boolean remote) {
        super(lib, engine, handle);
        this.remote = remote;
        long[] info = lib.memQuery(handle);
        this.region = new MemoryRegion(engineKey, (int) info[0], info[1], (int) info[2]);
        this.location = MemoryLocation.of((int) info[3]);
    }

    /** The engine key, id, size and device, as kvflux's engines describe memory. */
    public MemoryRegion region() {
        return region;
    }

    public MemoryLocation location() {
        return location;
    }

    /** Whether this is a peer's memory unpacked here, rather than a registration of this engine. */
    public boolean isRemote() {
        return remote;
    }

    /** The {@code MemoryDesc} in MoRI's msgpack layout, to send to a peer. */
    public byte[] pack() {
        return lib.memPack(handle);
    }

    /** Deregisters (or drops) the descriptor. */
    @Override
    void release() {
        lib.memDeregister(handle);
    }

    @Override
    public String toString() {
        return "MoriMemory[" + region + (remote ? ", remote" : "") + "]";
    }
}
