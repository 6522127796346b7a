package dev.kvflux.transfer.notify;

import java.lang.management.ManagementFactory;

/** Bytes the current thread allocates while running something, from the JVM's per-thread counter. */
final class Allocation {
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private Allocation() {
    }

    /** Bytes allocated by this thread so far. */
    static long now() {
        return THREADS.getCurrentThreadAllocatedBytes();
    }

    /** Bytes this thread allocated while {@code action} ran, whether it returned or threw. */
    static long during(Runnable action) {
        long before = now();
        try {
            action.run();
        } catch (RuntimeException expected) {
            // the caller checks what was thrown separately
        }
        return now() - before;
    }
}
