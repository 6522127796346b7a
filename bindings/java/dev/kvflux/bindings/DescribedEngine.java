package dev.kvflux.bindings;

/**
 * A {@link TransferEngine} whose peers meet through packed descriptors, as MoRI IO's do: the side that owns the
 * memory registers it and sends its {@link #engineDescriptor() engine descriptor} and the region's
 * {@link #memoryDescriptor memory descriptor}; the writing side {@linkplain #importPeer imports} them and opens a
 * session into the region it gets back. {@link #forgetPeer} undoes an import: it closes the sessions into that
 * region and the mapping of the peer's memory (an IPC mapping on GPUs).
 *
 * <p>Descriptors come from the network: {@link #importPeer} checks their size and shape before it acts on them and
 * refuses, with {@link IllegalArgumentException}, what is not a descriptor of this backend.
 */
public interface DescribedEngine extends TransferEngine {

    /** This engine's packed descriptor (MoRI's {@code EngineDesc}). */
    byte[] engineDescriptor();

    /**
     * The packed descriptor of a region this engine registered (MoRI's {@code MemoryDesc}; with the IPC handle
     * a peer process opens).
     *
     * @throws IllegalArgumentException if this engine did not register {@code local}
     */
    byte[] memoryDescriptor(MemoryRegion local);

    /**
     * Registers the peer's engine (again, harmlessly, if it is known) and its region, and returns the region as
     * the remote side of {@link #createSession}.
     *
     * @throws IllegalArgumentException if either descriptor is not one of this backend, saying what was wrong
     */
    MemoryRegion importPeer(byte[] engineDescriptor, byte[] memoryDescriptor);

    /**
     * Closes every session into {@code remote}, a region {@link #importPeer} returned, and the mapping of the
     * peer's memory behind it. Nothing may still be posted through those sessions. Unknown regions are ignored.
     */
    void forgetPeer(MemoryRegion remote);

    /** How many peer regions are imported and not yet forgotten. */
    int peersImported();
}
