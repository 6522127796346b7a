package dev.kvflux.bindings;

/**
 * One local × remote memory pair of a {@link TransferEngine}: the fast path for posting batches, as MoRI
 * IO's {@code IOEngineSession}. Submitting never blocks on the copies; every submit queries its status
 * once right after posting, as MoRI does.
 */
public interface TransferSession {

    /** A new transfer uid from the owning engine. */
    long allocateTransferUid();

    /**
     * Posts one batch of copies from the local region to the remote region and returns its one status.
     *
     * @throws IllegalArgumentException if a block runs past either region
     */
    TransferStatus batchWrite(BatchPlan plan, long transferUid);

    /**
     * Posts one batch of copies from the remote region into the local region and returns its status.
     *
     * @throws IllegalArgumentException if a block runs past either region
     */
    TransferStatus batchRead(BatchPlan plan, long transferUid);

    MemoryRegion local();

    MemoryRegion remote();
}
