package dev.kvflux.examples.lifecycle;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * Waits for what a side does in the background, with nothing to subscribe to (a block list's state after a
 * {@code release} or a lease): polls a condition every 5 ms, and fails saying what it waited for after 5 s.
 */
final class Await {
    private static final Duration AT_MOST = Duration.ofSeconds(5);
    private static final Duration EVERY = Duration.ofMillis(5);

    private Await() {
    }

    /** Returns once {@code condition} holds; an {@link AssertionError} naming {@code what} after 5 s. */
    static void until(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + AT_MOST.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("waited " + AT_MOST.toSeconds() + " s until " + what + ", in vain");
            }
            try {
                Thread.sleep(EVERY);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting until " + what, e);
            }
        }
    }
}
