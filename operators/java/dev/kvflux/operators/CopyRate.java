package dev.kvflux.operators;

import java.util.OptionalDouble;

/**
 * An engine's copy rate as the adaptive wait ({@link CompletionWait#adaptive(CopyRate)}) sees it: bytes in
 * flight when a wait began over the time until its last copy ended, averaged over the waits that ended with every
 * status done (an exponentially weighted mean, each new wait weighing a quarter). It is the rate a waiter
 * observes, queueing behind other requests' copies included, so under load it is lower than the link's.
 *
 * <p>Share one per engine (or per link) among the waits over its statuses. Thread-safe: a wait reads it once at
 * subscription and writes it once at its end.
 */
public final class CopyRate {
    private static final double WEIGHT = 0.25;
    private double bytesPerNano = Double.NaN;
    private long observations;

    private CopyRate(double bytesPerNano) {
        this.bytesPerNano = bytesPerNano;
    }

    /** A rate learnt from the waits alone: until the first wait ends, nothing is predicted and the wait polls every slice. */
    public static CopyRate learned() {
        return new CopyRate(Double.NaN);
    }

    /**
     * A rate that starts at {@code bytesPerSecond} (the link's nominal rate, say) and learns from there.
     *
     * @throws IllegalArgumentException if {@code bytesPerSecond} is not positive and finite
     */
    public static CopyRate startingAt(double bytesPerSecond) {
        if (!(bytesPerSecond > 0) || Double.isInfinite(bytesPerSecond)) {
            throw new IllegalArgumentException("bytesPerSecond must be positive and finite, got " + bytesPerSecond);
        }
        return new CopyRate(bytesPerSecond / 1e9);
    }

    /** The current estimate, in bytes per second; empty until one is known. */
    public synchronized OptionalDouble bytesPerSecond() {
        return Double.isNaN(bytesPerNano) ? OptionalDouble.empty() : OptionalDouble.of(bytesPerNano * 1e9);
    }

    /** How many waits taught it. */
    public synchronized long observations() {
        return observations;
    }

    /** How long {@code bytes} take at the current estimate, in nanoseconds; -1 when no estimate is known. */
    synchronized long predictNanos(long bytes) {
        if (Double.isNaN(bytesPerNano) || bytes < 0) {
            return -1;
        }
        return (long) Math.min(Long.MAX_VALUE / 4.0, bytes / bytesPerNano);
    }

    /** A wait saw {@code bytes} that were in flight when it began end {@code nanos} later. */
    synchronized void observe(long bytes, long nanos) {
        if (bytes <= 0 || nanos <= 0) {
            return;
        }
        double rate = (double) bytes / nanos;
        bytesPerNano = Double.isNaN(bytesPerNano) ? rate : bytesPerNano + WEIGHT * (rate - bytesPerNano);
        observations++;
    }

    @Override
    public synchronized String toString() {
        return "CopyRate[" + (Double.isNaN(bytesPerNano) ? "unknown"
                : String.format(java.util.Locale.ROOT, "%.3g bytes/s", bytesPerNano * 1e9))
                + ", " + observations + " waits]";
    }
}
