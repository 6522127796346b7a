package dev.kvflux.testing;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * An engine whose {@code waitAll} is MoRI's ({@link TransferEngine#moriWaitAll}) on a virtual clock that each sleep
 * advances on the calling thread (so no time passes between statuses), and records every timeout it is called with and the
 * thread it ran on. For strategies whose blocking loop runs on the test thread.
 */
public final class RecordingEngine implements TransferEngine {
    private final WaitClock waitClock;
    public final List<Long> timeouts = new CopyOnWriteArrayList<>();
    public final List<String> threads = new CopyOnWriteArrayList<>();

    public RecordingEngine(VirtualTimeScheduler clock) {
        this.waitClock = new WaitClock() {
            @Override
            public long nanoTime() {
                return clock.now(TimeUnit.NANOSECONDS);
            }

            @Override
            public boolean sleepUntil(long deadlineNanos) {
                long now = nanoTime();
                if (deadlineNanos > now) {
                    clock.advanceTimeBy(Duration.ofNanos(deadlineNanos - now));
                }
                return true;
            }
        };
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
        return TransferEngine.moriWaitAll(statuses, timeoutMs, waitClock);
    }

    @Override
    public void close() {
    }
}
