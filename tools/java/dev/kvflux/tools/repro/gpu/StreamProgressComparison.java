package dev.kvflux.tools.repro.gpu;

import dev.kvflux.tools.Stats;
import dev.kvflux.tools.repro.ReproRun;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * What {@code kvflux repro --backend cuda --stream-progress both} prints after its two runs: for each strategy
 * timed in both, how many times more native event queries per status the run without shared stream progress
 * made, over all its requests and in the wait alone, beside both runs' median detection lag.
 */
public final class StreamProgressComparison {
    private StreamProgressComparison() {
    }

    /** One line per strategy of {@code shared} that {@code unshared} timed too, in {@code shared}'s order. */
    public static List<String> lines(ReproRun.Result shared, ReproRun.Result unshared) {
        List<String> lines = new ArrayList<>();
        for (ReproRun.StrategyResult on : shared.strategies()) {
            Optional<ReproRun.StrategyResult> off = unshared.strategies().stream()
                    .filter(s -> s.strategy().equals(on.strategy())).findFirst();
            off.ifPresent(o -> lines.add(line(on.strategy(), Figures.of(on), Figures.of(o))));
        }
        return lines;
    }

    private static String line(String strategy, Figures on, Figures off) {
        return String.format(Locale.ROOT, "%s: native event queries per status %.2f unshared, %.2f shared (%s fewer"
                + " shared); in the wait alone %.2f unshared, %.2f shared (%s fewer shared); detection lag median"
                + " %.3f ms unshared, %.3f ms shared", strategy, off.queries(), on.queries(),
                times(off.queries(), on.queries()), off.waitQueries(), on.waitQueries(),
                times(off.waitQueries(), on.waitQueries()), off.lagMs(), on.lagMs());
    }

    /** A strategy's queries per status over all its requests (each request has as many statuses), and median lag. */
    private record Figures(double queries, double waitQueries, double lagMs) {
        static Figures of(ReproRun.StrategyResult s) {
            return new Figures(mean(s, GpuTarget.EVENT_QUERIES_PER_STATUS), mean(s, GpuTarget.WAIT_EVENT_QUERIES_PER_STATUS),
                    Stats.median(values(s, GpuTarget.DETECTION_LAG_MS)));
        }

        private static double mean(ReproRun.StrategyResult s, String key) {
            return Arrays.stream(values(s, key)).average().orElse(Double.NaN);
        }

        private static double[] values(ReproRun.StrategyResult s, String key) {
            return s.waits().stream().map(ReproRun.Wait::extras).map(extras -> extras.get(key))
                    .filter(Number.class::isInstance).mapToDouble(v -> ((Number) v).doubleValue()).toArray();
        }
    }

    /** How many times {@code fewer} goes into {@code more} ("all" when {@code fewer} is 0). */
    private static String times(double more, double fewer) {
        return fewer == 0 ? "all" : String.format(Locale.ROOT, "%.1fx", more / fewer);
    }
}
