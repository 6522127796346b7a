package dev.kvflux.transfer.internal;

import java.math.BigDecimal;
import java.time.Duration;

/** Durations in messages and log lines, written as a user writes them in the configuration: {@code 30s}, {@code 10ms}. */
public final class Durations {
    private Durations() {
    }

    /**
     * {@code duration} in the largest unit that keeps it short: whole or decimal seconds from one second up
     * ({@code 30s}, {@code 1.5s}), milliseconds from one millisecond ({@code 10ms}, {@code 2.5ms}), microseconds
     * below ({@code 500us}), {@code 0s} for zero; a negative one with a minus sign.
     */
    public static String format(Duration duration) {
        long nanos;
        try {
            nanos = duration.toNanos();
        } catch (ArithmeticException tooLong) {
            return duration.getSeconds() + "s";
        }
        if (nanos == 0) {
            return "0s";
        }
        String sign = nanos < 0 ? "-" : "";
        long abs = Math.abs(nanos);
        if (abs >= 1_000_000_000L) {
            return sign + scaled(abs, 9) + "s";
        }
        if (abs >= 1_000_000L) {
            return sign + scaled(abs, 6) + "ms";
        }
        return sign + scaled(abs, 3) + "us";
    }

    private static String scaled(long nanos, int scale) {
        return BigDecimal.valueOf(nanos, scale).stripTrailingZeros().toPlainString();
    }
}
