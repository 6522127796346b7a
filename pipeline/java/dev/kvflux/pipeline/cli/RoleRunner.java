package dev.kvflux.pipeline.cli;

import java.util.concurrent.CountDownLatch;

/** Keeps a serving role's process alive until it is stopped (Ctrl-C, SIGTERM), then closes it. */
final class RoleRunner {
    private RoleRunner() {
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
