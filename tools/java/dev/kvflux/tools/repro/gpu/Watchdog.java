package dev.kvflux.tools.repro.gpu;

import java.io.PrintStream;
import java.time.Duration;

/**
 * Ends the process with every thread's stack (exit code 3) if nothing progresses for {@code limit}: a GPU
 * or a driver call that hangs would otherwise hold a reproducer run for ever, without saying where.
 */
final class Watchdog implements AutoCloseable {
    /** The exit code of a run the watchdog ended. */
    static final int EXIT_HUNG = 3;

    private final Thread thread;
    private volatile long lastProgress = System.nanoTime();

    private Watchdog(Duration limit, PrintStream out) {
        long limitNanos = limit.toNanos();
        this.thread = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                if (System.nanoTime() - lastProgress > limitNanos) {
                    out.println("no progress for " + limit + "; threads:");
                    Thread.getAllStackTraces().forEach((t, stack) -> {
                        out.println(t);
                        for (StackTraceElement e : stack) {
                            out.println("    at " + e);
                        }
                    });
                    out.flush();
                    Runtime.getRuntime().halt(EXIT_HUNG);
                }
            }
        }, "kvflux-repro-watchdog");
        thread.setDaemon(true);
    }

    /** A watchdog that starts counting now. */
    static Watchdog start(Duration limit, PrintStream out) {
        Watchdog watchdog = new Watchdog(limit, out);
        watchdog.thread.start();
        return watchdog;
    }

    /** Something progressed: the count starts again. */
    void progressed() {
        lastProgress = System.nanoTime();
    }

    @Override
    public void close() {
        thread.interrupt();
    }
}
