package dev.kvflux.bindings;

import java.math.BigDecimal;
import java.time.Duration;

/**
 * How kvflux's library messages print a duration: {@code 30s}, {@code 1.5s}, {@code 10ms}, {@code 0.5ms},
 * {@code 250us}, {@code 40ns}, never {@code PT0.005S}. One second or more prints in seconds; shorter, in the
 * largest of ms, us and ns of which it holds at least one whole unit; each with the fraction it needs and no
 * trailing zeros. Zero is {@code 0s}; a negative duration gets a leading {@code -}.
 *
 * <p>The wait errors that mirror MoRIIO's own ({@code RDMA transfer timed out after 30s}) print seconds
 * always, as vLLM's connector does ({@code 0.2s}, not {@code 200ms}): see the operators'
 * {@code TransferException}.
 */
public final class DurationText {
    private static final long MICRO = 1_000L;
    private static final long MILLI = 1_000_000L;

    private DurationText() {
    }

    /** {@code d} as the library's messages print it (see the class comment). */
    public static String of(Duration d) {
        if (d.isNegative()) {
            return "-" + of(d.negated());
        }
        long nanos = d.getNano();
        if (d.getSeconds() > 0 || nanos == 0) {
            return decimal(BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(nanos, 9))) + "s";
        }
        if (nanos >= MILLI) {
            return decimal(BigDecimal.valueOf(nanos, 6)) + "ms";
        }
        if (nanos >= MICRO) {
            return decimal(BigDecimal.valueOf(nanos, 3)) + "us";
        }
        return nanos + "ns";
    }

    private static String decimal(BigDecimal value) {
        return value.signum() == 0 ? "0" : value.stripTrailingZeros().toPlainString();
    }
}
