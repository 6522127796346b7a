package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.tools.Stats;
import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;

/**
 * The arithmetic of {@code kvflux hostile}'s HTTP attacks, kept apart from their sockets so that it can be checked
 * alone: percentiles by nearest rank, shares and ratios that say {@code -1} when they cannot be computed (no
 * samples, an idle figure of 0), and the one-word outcome of an answer ({@code ok}, {@code 503 kv_blocks_exhausted},
 * {@code sse_error upstream_timeout}, {@code truncated}) by which answers are counted.
 */
final class AttackFigures {
    /** The outcome of an answer that is a success. */
    static final String OK = "ok";

    private AttackFigures() {
    }

    /** The percentile {@code p} (0 to 1) of {@code millis} by nearest rank, rounded to 0.01; -1 without samples. */
    static double percentile(Collection<Double> millis, double p) {
        if (millis.isEmpty()) {
            return -1;
        }
        double[] sorted = millis.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        return round(Stats.nearestRank(sorted, p));
    }

    /** {@code part} of {@code whole} in percent, rounded to 0.01; -1 when {@code whole} is 0. */
    static double percent(long part, long whole) {
        return whole == 0 ? -1 : round(100.0 * part / whole);
    }

    /** {@code during / idle}, rounded to 0.01; -1 when either is unknown (negative) or idle is 0. */
    static double ratio(double during, double idle) {
        return during < 0 || idle <= 0 ? -1 : round(during / idle);
    }

    /** {@code value} rounded to two decimals. */
    static double round(double value) {
        return Math.round(value * 100) / 100.0;
    }

    /** Kibibytes as mebibytes, rounded to 0.01. */
    static double mib(long kib) {
        return round(kib / 1024.0);
    }

    /** How many of each key there are, in key order. */
    static Map<String, Long> counts(Collection<String> keys) {
        Map<String, Long> counts = new TreeMap<>();
        for (String key : keys) {
            counts.merge(key, 1L, Long::sum);
        }
        return counts;
    }

    /**
     * The outcome of an answer of {@code status} whose body is {@code body}: for a 200, {@link #OK} when the body is a
     * whole answer (a stream ends with {@code data: [DONE]} and carries no error event, a plain answer is a JSON
     * object without {@code "error"}), {@code sse_error CODE} when a stream carries an error event, {@code truncated}
     * when a stream stops short; for any other status, the status and the body's {@code error.code}, or the status
     * alone when the body has none.
     */
    static String outcome(int status, String body, boolean stream) {
        if (status != 200) {
            String code = errorCode(body);
            return code == null ? Integer.toString(status) : status + " " + code;
        }
        if (!stream) {
            JsonNode json = json(body);
            if (json == null || !json.isObject()) {
                return "200 not_json";
            }
            return json.has("error") ? "200 " + text(json.path("error").path("code"), "error") : OK;
        }
        for (String line : body.split("\n")) {
            if (line.startsWith("data:") && line.contains("\"error\"")) {
                String code = errorCode(line.substring("data:".length()));
                return "sse_error " + (code == null ? "unknown" : code);
            }
        }
        return body.contains("data: [DONE]") ? OK : "truncated";
    }

    /** The {@code error.code} of a JSON error body, or null when {@code body} is not one. */
    static String errorCode(String body) {
        JsonNode json = json(body);
        if (json == null) {
            return null;
        }
        JsonNode code = json.path("error").path("code");
        return code.isMissingNode() || code.isNull() ? null : code.asText();
    }

    private static String text(JsonNode node, String otherwise) {
        return node.isMissingNode() || node.isNull() ? otherwise : node.asText();
    }

    private static JsonNode json(String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        try {
            return HttpJson.MAPPER.readTree(text.strip());
        } catch (java.io.IOException | RuntimeException e) {
            return null;
        }
    }
}
