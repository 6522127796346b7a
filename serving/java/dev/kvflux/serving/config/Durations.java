package dev.kvflux.serving.config;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Durations as people write them: {@code 30s}, {@code 500ms}, {@code 12.5us}, {@code 2m}; a bare number is seconds. */
public final class Durations {
    private static final Pattern FORM = Pattern.compile("\\s*(\\d+(?:\\.\\d+)?)\\s*(ns|us|µs|ms|s|m|h)?\\s*");

    private Durations() {
    }

    /**
     * Parses {@code text}.
     *
     * @throws IllegalArgumentException naming the text and the accepted forms
     */
    public static Duration parse(String text) {
        Matcher m = FORM.matcher(text == null ? "" : text);
        if (!m.matches()) {
            throw new IllegalArgumentException("'" + text + "' is not a duration; write a number with a unit"
                    + " (ns, us, ms, s, m, h), like 30s, 500ms or 12.5us, or a bare number of seconds");
        }
        String unit = m.group(2) == null ? "s" : m.group(2);
        long nanosPerUnit = switch (unit) {
            case "ns" -> 1L;
            case "us", "µs" -> 1_000L;
            case "ms" -> 1_000_000L;
            case "s" -> 1_000_000_000L;
            case "m" -> 60_000_000_000L;
            default -> 3_600_000_000_000L;
        };
        BigDecimal nanos = new BigDecimal(m.group(1)).multiply(BigDecimal.valueOf(nanosPerUnit));
        if (nanos.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
            throw new IllegalArgumentException("'" + text + "' is too long a duration");
        }
        return Duration.ofNanos(nanos.longValue());
    }

    /**
     * The duration in the largest unit that states it exactly, in a form {@link #parse} reads back to the
     * same duration: {@code 25h}, {@code 2m}, {@code 90s}, {@code 500ms}, {@code 12.5us}, {@code 40ns};
     * zero is {@code 0s}. One unit only, never {@code 1m30s}, since the parser reads one number and one
     * unit. A negative duration gets a leading {@code -} (which the parser does not accept).
     */
    public static String format(Duration d) {
        if (d.isNegative()) {
            return "-" + format(d.negated());
        }
        long seconds = d.getSeconds();
        int nano = d.getNano();
        if (nano == 0) {
            if (seconds != 0 && seconds % 3600 == 0) {
                return seconds / 3600 + "h";
            }
            if (seconds != 0 && seconds % 60 == 0) {
                return seconds / 60 + "m";
            }
            return seconds + "s";
        }
        if (seconds >= Long.MAX_VALUE / 1_000_000_000L) {
            return BigDecimal.valueOf(seconds).add(BigDecimal.valueOf(nano, 9)).stripTrailingZeros().toPlainString() + "s";
        }
        long nanos = d.toNanos();
        if (nanos % 1_000_000L == 0) {
            return nanos / 1_000_000L + "ms";
        }
        if (nanos >= 1_000) {
            return BigDecimal.valueOf(nanos, 3).stripTrailingZeros().toPlainString() + "us";
        }
        return nanos + "ns";
    }
}
