package dev.kvflux.pipeline.cli;

import dev.kvflux.pipeline.observe.Tracing;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;

/** Keeps a serving role's process alive until it is stopped (Ctrl-C, SIGTERM), then closes it. */
final class RoleRunner {
    private RoleRunner() {
    }

    /**
     * Reports a role that could not start (a port in use, an address that cannot be bound) as one line
     * on the command's error stream, without a stack trace.
     *
     * @return the exit code, 1
     */
    static int cannotStart(CommandLine cmd, RuntimeException e) {
        cmd.getErr().println("kvflux " + cmd.getCommandName() + ": " + e.getMessage());
        return 1;
    }

    /** Flushes and stops a role's span export, if it has one. */
    static void close(Tracing tracing) {
        if (tracing != null) {
            tracing.close();
        }
    }

    static int runUntilStopped(AutoCloseable role) {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                role.close();
            } catch (Exception e) {
                System.err.println("error while stopping: " + e);
            }
            stopped.countDown();
        }, "kvflux-stop"));
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
