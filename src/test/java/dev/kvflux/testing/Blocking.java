package dev.kvflux.testing;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/** Runs a blocking call on a real thread while the test thread drives virtual time. */
public final class Blocking {
    private Blocking() {
    }

    /** Starts {@code call} on a new virtual thread. */
    public static <T> CompletableFuture<T> start(Supplier<T> call) {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread.ofVirtual().name("blocking-call").start(() -> {
            try {
                result.complete(call.get());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        return result;
    }

    /** Waits (in real time, at most 5 s) until {@code condition} holds. */
    public static void awaitTrue(BooleanSupplier condition) {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > until) {
                throw new AssertionError("condition not met within 5 s of real time");
            }
            Thread.onSpinWait();
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    /** The call's result, waiting at most 5 s of real time. */
    public static <T> T result(CompletableFuture<T> call) {
        try {
            return call.get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("blocking call did not return within 5 s of real time", e);
        }
    }

    /** Asserts that the call is still running a little real time later. */
    public static void assertStillBlocked(CompletableFuture<?> call) {
        try {
            Thread.sleep(Duration.ofMillis(30));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (call.isDone()) {
            throw new AssertionError("the call returned although its time had not come: " + call.join());
        }
    }
}
