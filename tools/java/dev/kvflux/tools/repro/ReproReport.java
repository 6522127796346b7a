package dev.kvflux.tools.repro;

import dev.kvflux.serving.config.Durations;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.tools.Stats;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Prints a {@link ReproRun.Result}: a table like vLLM's reproducer prints, or one JSON document
 * {@code {"backend", "transfer_timeout_s", "slice_s", "setup", "strategies": [{"strategy", "waits",
 * "warmup_requests", "median_s", "min_s", "max_s", "statuses_succeeded", "statuses_total", "failed_waits",
 * "lag_p50_ms", "lag_p99_ms", "lag_max_ms", "stages", ...extras}]}},
 * where {@code setup} (only if the target described one) is the target's {@linkplain ReproTarget#setup()
 * setup}, {@code statuses_succeeded} and {@code statuses_total} are summed over the strategy's waits,
 * {@code stages} (only for push waits) is {@code {"<stage>": {"p50_ms", "p99_ms", "max_ms", "waits"}}} in the
 * order of the push's way ({@code callback_ran}, {@code notifier_woke}, {@code queued}, {@code taken},
 * {@code returned}, {@code settled}, {@code wait_began} where the copies ended before the wait began,
 * {@code subscribed} and {@code ended_at_subscription} for a wait that ended while it subscribed, with no push awaited,
 * {@code wait_ended},
 * {@code caller_woke}; each from the stage before it; {@code waits}: how many waits passed the stage), and
 * each extra figure a target reported becomes {@code {"median", "min", "max"}} for numbers or the list of
 * distinct values otherwise. Several runs of one command print one table each, or one JSON document
 * {@code {"runs": [...], "comparison": [lines]}}.
 */
public final class ReproReport {
    private ReproReport() {
    }

    public static String json(ReproRun.Result result) {
        return HttpJson.write(HttpJson.MAPPER.valueToTree(document(result)));
    }

    /** Several runs and the lines comparing them, as one document. */
    public static String json(List<ReproRun.Result> runs, List<String> comparison) {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("runs", runs.stream().map(ReproReport::document).toList());
        doc.put("comparison", comparison);
        return HttpJson.write(HttpJson.MAPPER.valueToTree(doc));
    }

    private static Map<String, Object> document(ReproRun.Result result) {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("backend", result.backend());
        doc.put("transfer_timeout_s", seconds(result.settings().transferTimeout().toNanos() / 1e9));
        doc.put("slice_s", seconds(result.settings().slice().toNanos() / 1e9));
        if (!result.setup().isEmpty()) {
            doc.put("setup", result.setup());
        }
        List<Object> strategies = new ArrayList<>();
        for (ReproRun.StrategyResult s : result.strategies()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("strategy", s.strategy());
            entry.put("waits", s.waits().size());
            entry.put("warmup_requests", s.warmUp());
            entry.put("median_s", seconds(s.median()));
            entry.put("min_s", seconds(s.min()));
            entry.put("max_s", seconds(s.max()));
            entry.put("statuses_succeeded", s.statusesSucceeded());
            entry.put("statuses_total", s.statusesTotal());
            entry.put("failed_waits", s.failedWaits());
            if (s.hasLag()) {
                entry.put("lag_p50_ms", seconds(s.lagP50Ms()));
                entry.put("lag_p99_ms", seconds(s.lagP99Ms()));
                entry.put("lag_max_ms", seconds(s.lagMaxMs()));
            }
            Map<String, double[]> stages = s.stages();
            if (!stages.isEmpty()) {
                Map<String, Object> byStage = new LinkedHashMap<>();
                stages.forEach((stage, f) -> {
                    Map<String, Object> figures = new LinkedHashMap<>();
                    figures.put("p50_ms", seconds(f[0]));
                    figures.put("p99_ms", seconds(f[1]));
                    figures.put("max_ms", seconds(f[2]));
                    figures.put("waits", (long) f[3]);
                    byStage.put(stage, figures);
                });
                entry.put("stages", byStage);
            }
            extras(s).forEach(entry::putIfAbsent);
            strategies.add(entry);
        }
        doc.put("strategies", strategies);
        return doc;
    }

    public static String table(ReproRun.Result result) {
        ReproGeometry g = result.geometry();
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT,
                "kvflux repro on %s: %d layers x %d blocks x %s per request, one batch per layer, transfer timeout %s%n",
                result.backend(), g.layers(), g.blocks(), bytes(g.blockBytes()),
                Durations.format(result.settings().transferTimeout())));
        if (!result.setup().isEmpty()) {
            out.append("setup: ").append(describe(result.setup())).append(System.lineSeparator());
        }
        out.append(System.lineSeparator());
        List<String[]> rows = new ArrayList<>();
        List<ReproRun.StrategyResult> all = result.strategies();
        rows.add(row("", all, ReproRun.StrategyResult::strategy));
        rows.add(row("number of waits timed", all, s -> String.valueOf(s.waits().size())));
        rows.add(row("wait, median (s)", all, s -> fixed(s.median())));
        rows.add(row("wait, min / max (s)", all, s -> fixed(s.min()) + " / " + fixed(s.max())));
        rows.add(row("statuses succeeded at the end", all, ReproReport::succeeded));
        rows.add(row("failed waits", all, s -> String.valueOf(s.failedWaits())));
        if (all.stream().anyMatch(ReproRun.StrategyResult::hasLag)) {
            rows.add(row("lag p50 / max (ms)", all, s -> s.hasLag()
                    ? millis(s.lagP50Ms()) + " / " + millis(s.lagMaxMs()) : "-"));
        }
        Set<String> stageNames = new LinkedHashSet<>();
        all.forEach(s -> stageNames.addAll(s.stages().keySet()));
        for (String stage : stageNames) {
            rows.add(row("stage " + stage.replace('_', ' ') + ", p50 / p99 / max (ms)", all, s -> {
                double[] f = s.stages().get(stage);
                return f == null ? "-" : millis(f[0]) + " / " + millis(f[1]) + " / " + millis(f[2]);
            }));
        }
        Set<String> extraKeys = new LinkedHashSet<>();
        all.forEach(s -> extraKeys.addAll(extras(s).keySet()));
        for (String key : extraKeys) {
            rows.add(row(key.replace('_', ' ') + ", median (min / max)", all, s -> extraCell(extras(s).get(key))));
        }
        int[] widths = new int[rows.getFirst().length];
        for (String[] r : rows) {
            for (int i = 0; i < r.length; i++) {
                widths[i] = Math.max(widths[i], r[i].length());
            }
        }
        for (String[] r : rows) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < r.length; i++) {
                line.append(String.format("%-" + (widths[i] + 3) + "s", r[i]));
            }
            out.append(line.toString().stripTrailing()).append(System.lineSeparator());
        }
        for (ReproRun.StrategyResult s : all) {
            s.waits().stream().filter(ReproRun.Wait::failed).map(ReproRun.Wait::error).distinct().limit(3)
                    .forEach(e -> out.append(System.lineSeparator()).append(s.strategy()).append(": ").append(e));
        }
        return out.toString();
    }

    /** A setup as one line: {@code prefill_gpu 0, decode_gpu 1, copy_path default}. */
    public static String describe(Map<String, Object> setup) {
        return String.join(", ", setup.entrySet().stream().map(e -> e.getKey() + " " + e.getValue()).toList());
    }

    private static String[] row(String label, List<ReproRun.StrategyResult> all,
                                java.util.function.Function<ReproRun.StrategyResult, String> cell) {
        String[] r = new String[all.size() + 1];
        r[0] = label;
        for (int i = 0; i < all.size(); i++) {
            r[i + 1] = cell.apply(all.get(i));
        }
        return r;
    }

    private static String succeeded(ReproRun.StrategyResult s) {
        int total = s.waits().getFirst().total();
        int least = s.waits().stream().mapToInt(ReproRun.Wait::succeeded).min().orElse(0);
        int most = s.waits().stream().mapToInt(ReproRun.Wait::succeeded).max().orElse(0);
        if (least == total && most == total) {
            return total + " of " + total + " in every wait";
        }
        return (least == most ? String.valueOf(least) : least + " to " + most) + " of " + total;
    }

    /** Extra figures aggregated: numbers → median / min / max; anything else → its distinct values. */
    static Map<String, Object> extras(ReproRun.StrategyResult s) {
        Map<String, List<Object>> byKey = new LinkedHashMap<>();
        for (ReproRun.Wait w : s.waits()) {
            w.extras().forEach((k, v) -> byKey.computeIfAbsent(k, x -> new ArrayList<>()).add(v));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        byKey.forEach((key, values) -> {
            if (values.stream().allMatch(v -> v instanceof Number)) {
                double[] numbers = values.stream().mapToDouble(v -> ((Number) v).doubleValue()).toArray();
                Map<String, Object> agg = new LinkedHashMap<>();
                agg.put("median", seconds(Stats.median(numbers)));
                agg.put("min", seconds(Stats.min(numbers)));
                agg.put("max", seconds(Stats.max(numbers)));
                out.put(key, agg);
            } else {
                out.put(key, new ArrayList<>(new LinkedHashSet<>(values)));
            }
        });
        return out;
    }

    private static String extraCell(Object aggregate) {
        if (aggregate instanceof Map<?, ?> m) {
            return m.get("median") + " (" + m.get("min") + " / " + m.get("max") + ")";
        }
        return aggregate == null ? "-" : String.valueOf(aggregate);
    }

    /**
     * {@code s} to six decimals without trailing zeros, a whole number as a {@code long}: so that neither the
     * table nor the JSON writes it with an exponent ({@code 30}, not {@code 3E+1}).
     */
    private static Number seconds(double s) {
        BigDecimal rounded = BigDecimal.valueOf(s).setScale(6, RoundingMode.HALF_UP).stripTrailingZeros();
        return rounded.scale() <= 0 && rounded.abs().compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) < 0
                ? rounded.longValue() : rounded;
    }

    private static String millis(double ms) {
        return String.format(Locale.ROOT, ms < 10 ? "%.3f" : "%.1f", ms);
    }

    private static String fixed(double s) {
        return String.format(Locale.ROOT, "%.3f", s);
    }

    private static String bytes(long n) {
        return n % 1024 == 0 ? n / 1024 + " KiB" : n + " B";
    }
}
