package dev.kvflux.tools.scale;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.tools.Stats;
import java.time.Instant;
import java.util.List;
import java.util.Locale;

/** The scale bench's table and JSON document. */
public final class ScaleReport {
    private ScaleReport() {
    }

    /** The machine the figures come from: cores the JVM sees, Java version, OS, date. */
    public static String machine() {
        return Runtime.getRuntime().availableProcessors() + " cores, Java " + Runtime.version() + ", "
                + System.getProperty("os.name") + " " + System.getProperty("os.arch") + ", " + Instant.now();
    }

    public static String table(List<ScaleRow> rows) {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "%-28s %7s %6s %6s %6s %26s %11s %9s %11s %6s %9s %9s %9s%n", "strategy",
                "N", "cores", "notif", "wait", "lag p50 / p99 / max (ms)", "notif p99", "code()/st", "GC n / ms", "errors",
                "B/st/tick", "B/push", "behind ms"));
        for (ScaleRow r : rows) {
            out.append(String.format(Locale.ROOT, "%-28s %,7d %6.2f %6.2f %6.2f %26s %11.2f %9.1f %11s %6s %9s %9s %9.1f%n",
                    r.recorder().equals("none") ? r.strategy() : r.strategy() + " +" + r.recorder(), r.n(), r.coresUsed(), r.notifierCores(),
                    r.waitCores(),
                    String.format(Locale.ROOT, "%.2f / %.2f / %.2f", r.lagP50Ms(), r.lagP99Ms(), r.lagMaxMs()),
                    r.notifierLagP99Ms(),
                    r.queriesPerStatus(), r.gcCount() + " / " + r.gcMillis(),
                    r.unfinished() == 0 ? Long.toString(r.errors()) : r.errors() + "+" + r.unfinished() + "?",
                    figure(r.bytesPerStatusTick()), figure(r.notifierBytesPerStatus()), r.notifierBehindMs()));
        }
        out.append("cores: process CPU time / wall; notif: the notifier threads' share of it (" + notifiers(rows)
                + "); wait: cores less those of the same notifiers finishing the same statuses with no wait ("
                + backends(rows) + "), what the wait adds; lag: completion signal minus the request's last status's scheduled finish"
                + " time; notif p99: the notifiers' part of the lag (how late they finished a request's last status),"
                + " 99th percentile, the rest being the wait's own; B/st/tick: bytes allocated per status query while statuses stay in flight (polling waits);"
                + " B/push: bytes the notifier thread allocated per status it pushed; behind: how late the notifier"
                + " finished its last status.\n");
        out.append(overhead(rows));
        out.append("machine: ").append(machine());
        return out.toString();
    }

    /**
     * For each strategy and N measured with and without the Micrometer recorder: the waits' CPU time
     * ({@link ScaleRow#roundCpuMillis()}) of all their measured rounds and of each pair of neighbouring rounds
     * (their order alternates), micrometer over none; empty otherwise. CPU time rather than cores: a starved
     * round stretches its wall time, not its work.
     */
    static String overhead(List<ScaleRow> rows) {
        StringBuilder out = new StringBuilder();
        for (ScaleRow with : rows) {
            if (!with.recorder().equals("micrometer")) {
                continue;
            }
            for (ScaleRow without : rows) {
                if (!without.recorder().equals("none") || !without.strategy().equals(with.strategy())
                        || without.n() != with.n()) {
                    continue;
                }
                int pairs = Math.min(with.roundCpuMillis().size(), without.roundCpuMillis().size());
                double[] ratios = new double[pairs];
                double withCpu = 0;
                double withoutCpu = 0;
                StringBuilder each = new StringBuilder();
                for (int i = 0; i < pairs; i++) {
                    withCpu += with.roundCpuMillis().get(i);
                    withoutCpu += without.roundCpuMillis().get(i);
                    ratios[i] = with.roundCpuMillis().get(i) / without.roundCpuMillis().get(i) - 1;
                    each.append(i == 0 ? "" : ", ").append(percent(ratios[i]));
                }
                out.append(String.format(Locale.ROOT, "recorder cost, %s at N = %,d: wait CPU %.1f ms with micrometer,"
                                + " %.1f ms without over %d rounds each (%s); round pairs %s; median %s%s%n",
                        with.strategy(), with.n(), withCpu, withoutCpu, pairs, percent(withCpu / withoutCpu - 1),
                        each, pairs == 0 ? "-" : percent(Stats.median(ratios)), wakeups(with, without, withCpu, withoutCpu)));
            }
        }
        return out.toString();
    }

    /**
     * The wake-ups of both rows and the CPU per wake-up, when the platform counts them: a gap in CPU that
     * the wake-ups account for is the scheduling's, not the recording's.
     */
    private static String wakeups(ScaleRow with, ScaleRow without, double withCpu, double withoutCpu) {
        long withWakeups = with.roundWakeups().stream().mapToLong(Long::longValue).sum();
        long withoutWakeups = without.roundWakeups().stream().mapToLong(Long::longValue).sum();
        if (with.roundWakeups().contains(-1L) || without.roundWakeups().contains(-1L) || withWakeups <= 0
                || withoutWakeups <= 0) {
            return "";
        }
        return String.format(Locale.ROOT, "; wake-ups %,d with, %,d without (%s); CPU per wake-up %.2f us with,"
                        + " %.2f us without (%s)", withWakeups, withoutWakeups,
                percent((double) withWakeups / withoutWakeups - 1), withCpu * 1000 / withWakeups,
                withoutCpu * 1000 / withoutWakeups, percent(withCpu / withWakeups / (withoutCpu / withoutWakeups) - 1));
    }

    private static String percent(double fraction) {
        return String.format(Locale.ROOT, "%+.1f%%", fraction * 100);
    }

    private static String figure(double value) {
        return Double.isNaN(value) ? "-" : String.format(Locale.ROOT, "%.1f", value);
    }

    public static String json(List<ScaleRow> rows, ScaleBench.Settings settings) {
        ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        ObjectNode root = mapper.createObjectNode();
        root.put("machine", machine());
        root.put("cores", Runtime.getRuntime().availableProcessors());
        root.put("date", Instant.now().toString());
        root.put("statuses", settings.statuses());
        root.put("spread_ms", settings.spread().toMillis());
        root.put("slice_ms", settings.slice().toMillis());
        root.put("rounds", settings.rounds());
        root.put("warmup", settings.warmup());
        root.put("notifiers", settings.notifiers());
        root.put("notifier_tick_us", settings.notifierTick().toNanos() / 1e3);
        ArrayNode out = root.putArray("rows");
        for (ScaleRow r : rows) {
            ObjectNode row = out.addObject();
            row.put("strategy", r.strategy());
            row.put("recorder", r.recorder());
            row.put("n", r.n());
            row.put("cores_used", r.coresUsed());
            row.put("lag_p50_ms", r.lagP50Ms());
            row.put("lag_p99_ms", r.lagP99Ms());
            row.put("lag_max_ms", r.lagMaxMs());
            row.put("code_calls_per_status", r.queriesPerStatus());
            row.put("gc_count", r.gcCount());
            row.put("gc_ms", r.gcMillis());
            row.put("errors", r.errors());
            row.put("unfinished", r.unfinished());
            putFigure(row, "bytes_per_status_tick", r.bytesPerStatusTick());
            putFigure(row, "notifier_bytes_per_push", r.notifierBytesPerStatus());
            row.put("notifier_behind_ms", r.notifierBehindMs());
            row.put("notifier_cores", r.notifierCores());
            row.put("backend_cores", r.backendCores());
            row.put("wait_cores", r.waitCores());
            row.put("notifier_lag_p99_ms", r.notifierLagP99Ms());
            ArrayNode perRound = row.putArray("round_cpu_ms");
            r.roundCpuMillis().forEach(perRound::add);
            ArrayNode wakeups = row.putArray("round_wakeups");
            r.roundWakeups().forEach(wakeups::add);
        }
        try {
            return mapper.writeValueAsString(root);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The backend's own cores at each N, as the footnote gives them. */
    private static String backends(List<ScaleRow> rows) {
        java.util.Map<Integer, Double> byN = new java.util.LinkedHashMap<>();
        rows.forEach(r -> byN.putIfAbsent(r.n(), r.backendCores()));
        java.util.StringJoiner out = new java.util.StringJoiner(", ");
        byN.forEach((n, cores) -> out.add(String.format(Locale.ROOT, "%.2f at N = %,d", cores, n)));
        return out.toString();
    }

    private static String notifiers(List<ScaleRow> rows) {
        int k = rows.isEmpty() ? 1 : rows.getFirst().notifiers();
        return k == 1 ? "one notifier thread" : k + " notifier threads";
    }

    private static void putFigure(ObjectNode row, String name, double value) {
        if (Double.isNaN(value)) {
            row.putNull(name);
        } else {
            row.put(name, value);
        }
    }
}
