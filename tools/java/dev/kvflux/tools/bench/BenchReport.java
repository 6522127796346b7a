package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.role.Policy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The serving benchmark's outputs: a text table, JSON for machines, and a self-contained HTML page. */
public final class BenchReport {
    private static final String[] COLOURS = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

    private BenchReport() {
    }

    /** Prefill's TP size / decode's. */
    private static String tp(BenchRow row) {
        return row.tp().prefillTp() + "/" + row.tp().decodeTp();
    }

    /** One line per row, with a header. */
    public static String table(List<BenchRow> rows) {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "%-7s %-5s %-5s %5s %7s %9s %6s %6s %13s %7s %9s %8s %8s %8s%n",
                "policy", "mode", "tp", "conc", "prompts", "completed", "failed", "never", "waits_in_prog", "req/s", "ttft_mean",
                "ttft_p50", "ttft_p90", "ttft_p99"));
        for (BenchRow row : rows) {
            LoadResult r = row.load();
            out.append(String.format(Locale.ROOT, "%-7s %-5s %-5s %5d %7d %9d %6d %6d %13d %7.2f %9s %8s %8s %8s%n",
                    row.policy().wireName(), row.kvMode().wireName(), tp(row), row.concurrency(), row.numPrompts(), r.completed(), r.failed(),
                    r.neverFinished(), row.failedWaitsInProgress(), r.requestThroughput(), secs(r.ttftMean()),
                    secs(r.ttftPercentile(50)), secs(r.ttftPercentile(90)), secs(r.ttftPercentile(99))));
        }
        for (BenchRow row : rows) {
            if (row.handover() != null) {
                out.append(String.format(Locale.ROOT, "%nhandover stages, %s %s %s c=%d (each from the stage before it;"
                                + " = lines span several; one clock, the roles in this process)%n",
                        row.policy().wireName(), row.kvMode().wireName(), tp(row), row.concurrency()))
                        .append(HandoverLog.table(row.handover()));
            }
        }
        return out.toString();
    }

    /**
     * {@code {"results": [{"policy", "concurrency", "completed", "failed", "never_finished",
     * "failed_waits_in_progress", "request_throughput", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s",
     * "ttft_p99_s", ...}], "settings": {...}}}; a TTFT with no completed request is null.
     */
    public static String json(List<BenchRow> rows, Map<String, Object> settings) {
        ObjectNode root = HttpJson.MAPPER.createObjectNode();
        ArrayNode results = root.putArray("results");
        for (BenchRow row : rows) {
            LoadResult r = row.load();
            ObjectNode o = results.addObject();
            o.put("policy", row.policy().wireName());
            o.put("kv_mode", row.kvMode().wireName());
            o.put("prefill_tp", row.tp().prefillTp());
            o.put("decode_tp", row.tp().decodeTp());
            o.put("concurrency", row.concurrency());
            o.put("completed", r.completed());
            o.put("failed", r.failed());
            o.put("never_finished", r.neverFinished());
            o.put("failed_waits_in_progress", row.failedWaitsInProgress());
            o.put("request_throughput", round(r.requestThroughput()));
            number(o, "ttft_mean_s", r.ttftMean());
            number(o, "ttft_p50_s", r.ttftPercentile(50));
            number(o, "ttft_p90_s", r.ttftPercentile(90));
            number(o, "ttft_p99_s", r.ttftPercentile(99));
            o.put("num_prompts", row.numPrompts());
            o.put("injected_faults", row.injectedFaults());
            o.put("decode_write_failed_notices", row.writeFailedNotices());
            o.put("decode_deadlines", row.decodeDeadlines());
            if (row.handover() != null) {
                ArrayNode stages = o.putArray("handover_stages");
                for (HandoverLog.Span s : row.handover().stages()) {
                    span(stages.addObject(), s);
                }
                span(o.putObject("handover"), row.handover().handover());
                span(o.putObject("handover_after_copy"), row.handover().afterCopy());
                span(o.putObject("client_first_byte"), row.handover().clientFirstByte());
                span(o.putObject("prefill_answered"), row.handover().prefillAnswered());
                span(o.putObject("after_prefill_answer"), row.handover().afterPrefillAnswer());
            }
        }
        root.set("settings", HttpJson.MAPPER.valueToTree(settings));
        return HttpJson.write(root);
    }

    /** {@code {"from", "to", "n", "p50_ms", "p99_ms"}}, a percentile with no request null. */
    private static void span(ObjectNode o, HandoverLog.Span s) {
        o.put("from", s.from());
        o.put("to", s.to());
        o.put("n", s.n());
        number(o, "p50_ms", s.p50Ms());
        number(o, "p99_ms", s.p99Ms());
    }

    /** A page with the table and, per policy, the TTFT distribution (one curve per concurrency) as inline SVG. */
    public static String html(List<BenchRow> rows, Map<String, Object> settings, double transferTimeoutSeconds) {
        StringBuilder page = new StringBuilder();
        page.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvflux serve-bench</title>\n")
                .append("<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse}")
                .append("td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}th{background:#eee}")
                .append("td:first-child{text-align:left}.note{color:#555;font-size:90%}</style></head><body>\n")
                .append("<h1>kvflux serve-bench</h1>\n<p class=\"note\">");
        settings.forEach((k, v) -> page.append(escape(k)).append(": ").append(escape(String.valueOf(v))).append("; "));
        page.append("</p>\n<table><tr><th>policy</th><th>KV mode</th><th>TP</th><th>concurrency</th><th>prompts</th>")
                .append("<th>completed</th>")
                .append("<th>failed</th><th>never finished</th><th>waits failed IN_PROGRESS</th><th>req/s</th>")
                .append("<th>TTFT mean (s)</th><th>p50</th><th>p90</th><th>p99</th></tr>\n");
        for (BenchRow row : rows) {
            LoadResult r = row.load();
            page.append(String.format(Locale.ROOT,
                    "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.2f</td>"
                            + "<td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>%n",
                    row.policy().wireName(), row.kvMode().wireName(), tp(row), row.concurrency(), row.numPrompts(),
                    r.completed(), r.failed(), r.neverFinished(), row.failedWaitsInProgress(), r.requestThroughput(),
                    secs(r.ttftMean()), secs(r.ttftPercentile(50)), secs(r.ttftPercentile(90)),
                    secs(r.ttftPercentile(99))));
        }
        page.append("</table>\n");
        Map<Policy, List<BenchRow>> byPolicy = new LinkedHashMap<>();
        for (BenchRow row : rows) {
            byPolicy.computeIfAbsent(row.policy(), p -> new ArrayList<>()).add(row);
        }
        for (Map.Entry<Policy, List<BenchRow>> entry : byPolicy.entrySet()) {
            page.append("<h2>").append(entry.getKey().wireName()).append(": client TTFT distribution</h2>\n")
                    .append(cdf(entry.getValue(), axisEnd(entry.getValue(), transferTimeoutSeconds),
                            transferTimeoutSeconds));
            for (BenchRow row : entry.getValue()) {
                List<String> errors = row.load().sampleErrors(3);
                if (!errors.isEmpty()) {
                    page.append("<p class=\"note\">c=").append(row.concurrency()).append(" errors seen: ");
                    errors.forEach(e -> page.append("<br><code>").append(escape(e)).append("</code>"));
                    page.append("</p>\n");
                }
            }
        }
        page.append("<p class=\"note\">Each curve is the share of all sent requests (y) whose first token came")
                .append(" within x seconds; requests that failed or never finished never reach the curve, so it")
                .append(" stops below 1. The dashed line is the transfer timeout; each plot has its own time axis.</p>\n</body></html>\n");
        return page.toString();
    }

    /** The x axis of a policy's plot: past its slowest first token and past the transfer timeout. */
    private static double axisEnd(List<BenchRow> rows, double timeout) {
        double end = timeout * 1.1;
        for (BenchRow row : rows) {
            double[] t = row.load().ttfts();
            if (t.length > 0) {
                end = Math.max(end, t[t.length - 1] * 1.05);
            }
        }
        return end;
    }

    /** An empirical CDF per row, over all sent requests, as an SVG. */
    private static String cdf(List<BenchRow> rows, double xMax, double timeout) {
        int w = 720;
        int h = 300;
        int left = 50;
        int bottom = 40;
        int top = 10;
        int right = 140;
        double pw = w - left - right;
        double ph = h - top - bottom;
        StringBuilder svg = new StringBuilder();
        svg.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\""
                + " font-size=\"11\">%n", w, h));
        svg.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\""
                + " stroke=\"#888\"/>%n", left, top, pw, ph));
        for (int i = 0; i <= 5; i++) {
            double x = left + pw * i / 5;
            double y = top + ph - ph * i / 5;
            svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.1f</text>%n",
                    x, h - bottom + 14, xMax * i / 5));
            svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>%n",
                    left - 4, y + 4, i / 5.0));
        }
        svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">client TTFT (s)</text>%n",
                left + pw / 2, h - 6));
        double tx = left + pw * Math.min(timeout, xMax) / xMax;
        svg.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\""
                + " stroke-dasharray=\"4 3\"/>%n", tx, top, tx, top + ph));
        for (int i = 0; i < rows.size(); i++) {
            BenchRow row = rows.get(i);
            double[] t = row.load().ttfts();
            int sent = row.load().sent();
            String colour = COLOURS[i % COLOURS.length];
            StringBuilder points = new StringBuilder();
            points.append(String.format(Locale.ROOT, "%d,%.1f ", left, top + ph));
            for (int k = 0; k < t.length; k++) {
                double x = left + pw * Math.min(t[k], xMax) / xMax;
                double yBefore = top + ph - ph * k / sent;
                double yAfter = top + ph - ph * (k + 1) / sent;
                points.append(String.format(Locale.ROOT, "%.1f,%.1f %.1f,%.1f ", x, yBefore, x, yAfter));
            }
            double yEnd = top + ph - ph * t.length / Math.max(1, sent);
            points.append(String.format(Locale.ROOT, "%.1f,%.1f", left + pw, yEnd));
            svg.append(String.format(Locale.ROOT, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\""
                    + " points=\"%s\"/>%n", colour, points));
            svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" fill=\"%s\">c=%d: %d/%d done</text>%n",
                    left + pw + 8, top + 14 + 16 * i, colour, row.concurrency(), t.length, sent));
        }
        return svg.append("</svg>\n").toString();
    }

    private static String secs(double value) {
        return Double.isNaN(value) ? "-" : String.format(Locale.ROOT, "%.3f", value);
    }

    private static double round(double value) {
        return Math.round(value * 1000) / 1000.0;
    }

    private static void number(ObjectNode o, String key, double value) {
        if (Double.isNaN(value)) {
            o.putNull(key);
        } else {
            o.put(key, round(value));
        }
    }

    private static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
