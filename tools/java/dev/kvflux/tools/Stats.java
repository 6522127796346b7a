package dev.kvflux.tools;

import java.util.Arrays;

/**
 * The order statistics every tool reports, defined once: the median, the extremes, and percentiles by
 * nearest rank or by linear interpolation. None of them changes its argument; each returns NaN for no
 * values.
 */
public final class Stats {
    private Stats() {
    }

    /** The middle value, or the mean of the two middle values when there is an even number of them. */
    public static double median(double... values) {
        return interpolated(sorted(values), 0.5);
    }

    public static double min(double... values) {
        return Arrays.stream(values).min().orElse(Double.NaN);
    }

    public static double max(double... values) {
        return Arrays.stream(values).max().orElse(Double.NaN);
    }

    /**
     * The percentile {@code p} (0 to 1) of {@code sorted} (ascending) by nearest rank: the smallest value
     * with at least {@code p} of all the values at or below it. Every result is one of the values.
     */
    public static double nearestRank(double[] sorted, double p) {
        checkFraction(p);
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int index = (int) Math.ceil(p * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
    }

    /**
     * The percentile {@code p} (0 to 1) of {@code sorted} (ascending), interpolated linearly between the
     * two closest ranks (numpy's default); at 0.5 it is the {@linkplain #median median}.
     */
    public static double interpolated(double[] sorted, double p) {
        checkFraction(p);
        if (sorted.length == 0) {
            return Double.NaN;
        }
        double rank = p * (sorted.length - 1);
        int lo = (int) Math.floor(rank);
        int hi = (int) Math.ceil(rank);
        return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
    }

    /** A sorted copy of {@code values}. */
    public static double[] sorted(double... values) {
        double[] copy = values.clone();
        Arrays.sort(copy);
        return copy;
    }

    private static void checkFraction(double p) {
        if (!(p >= 0 && p <= 1)) {
            throw new IllegalArgumentException("a percentile is a fraction from 0 to 1, got " + p);
        }
    }
}
