package dev.kvflux.bindings;

import java.util.List;

/**
 * A transfer engine shaped like MoRI IO's {@code IOEngine}: it owns memory registrations and sessions,
 * and it has MoRI's native bounded wait.
 */
public interface TransferEngine extends AutoCloseable {

    /** The backend's name as the CLI and reports print it ({@code sim-xgmi}, {@code native-sim}, {@code cuda}). */
    String backend();

    /** Registers {@code size} bytes on {@code device} (-1 for host memory) and returns the region. */
    MemoryRegion registerMemory(long size, int device);

    /** A session from a region this engine registered to a region the peer registered. */
    TransferSession createSession(MemoryRegion local, MemoryRegion remote);

    /**
     * MoRI's {@code WaitAll}: an empty list is SUCCESS; {@code timeoutMs == 0} polls each status once
     * (first failure wins, else IN_PROGRESS if any is in flight, else SUCCESS); {@code timeoutMs < 0}
     * blocks until every status is terminal and returns the first failure; {@code timeoutMs > 0} waits
     * the statuses in order against one deadline, each for the time left truncated to whole
     * milliseconds, and returns IN_PROGRESS as soon as one is still in flight after its wait or the
     * deadline has passed, a failure seen before then taking precedence (see {@link MoriWaitAll}). A
     * status never posted (INIT) is the failure ERR_BAD_STATE.
     *
     * <p>Blocks the calling thread: never call it on a non-blocking Reactor thread.
     */
    StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs);

    @Override
    void close();
}
