package dev.kvflux.testing;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * An engine whose {@code waitAll} follows xGMI's bounded wait (poll, sleep to the deadline, poll) by
 * advancing a virtual clock on the calling thread, and records every timeout it is called with and the
 * thread it ran on. For strategies whose blocking loop runs on the test thread.
 */
public final class RecordingEngine implements TransferEngine {
    private final VirtualTimeScheduler clock;
    public final List<Long> timeouts = new CopyOnWriteArrayList<>();
    public final List<String> threads = new CopyOnWriteArrayList<>();

    public RecordingEngine(VirtualTimeScheduler clock) {
        this.clock = clock;
    }

    @Override
    public String backend() {
        return "recording";
    }

    @Override
    public MemoryRegion registerMemory(long size, int device) {
        throw new UnsupportedOperationException("the recording engine only waits");
    }

    @Override
    public TransferSession createSession(MemoryRegion local, MemoryRegion remote) {
        throw new UnsupportedOperationException("the recording engine only waits");
    }

    @Override
    public StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        timeouts.add(timeoutMs);
        threads.add(Thread.currentThread().getName());
        StatusCode first = poll(statuses);
        if (first != StatusCode.IN_PROGRESS || timeoutMs == 0) {
            return first;
        }
        clock.advanceTimeBy(Duration.ofMillis(timeoutMs));
        return poll(statuses);
    }

    private static StatusCode poll(List<? extends TransferStatus> statuses) {
        boolean inFlight = false;
        for (TransferStatus status : statuses) {
            StatusCode code = status.code();
            if (code.isFailure()) {
                return code;
            }
            inFlight |= code != StatusCode.SUCCESS;
        }
        return inFlight ? StatusCode.IN_PROGRESS : StatusCode.SUCCESS;
    }

    @Override
    public void close() {
    }
}
