package dev.kvflux.serving.metrics;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Samples read from Prometheus text (format 0.0.4), as a role's {@code GET /metrics} serves it: one
 * {@code name{label="value",...} value} line each; comments and blank lines are skipped. For the tools that
 * read a role's figures (the chaos run, the hostile probe) and for tests; not a general Prometheus client.
 */
public final class PrometheusText {
    private final List<Sample> samples;

    private PrometheusText(List<Sample> samples) {
        this.samples = samples;
    }

    /** One line: the series name, its labels in order, and its value. */
    public record Sample(String name, Map<String, String> labels, double value) {
    }

    /**
     * The samples of {@code text}.
     *
     * @throws IllegalArgumentException naming the line that is not a sample
     */
    public static PrometheusText parse(String text) {
        List<Sample> samples = new ArrayList<>();
        for (String line : text.split("\n")) {
            String trimmed = line.strip();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                continue;
            }
            samples.add(sample(trimmed));
        }
        return new PrometheusText(List.copyOf(samples));
    }

    private static Sample sample(String line) {
        int i = 0;
        while (i < line.length() && line.charAt(i) != '{' && line.charAt(i) != ' ') {
            i++;
        }
        String name = line.substring(0, i);
        Map<String, String> labels = new LinkedHashMap<>();
        if (i < line.length() && line.charAt(i) == '{') {
            i++;
            while (i < line.length() && line.charAt(i) != '}') {
                int eq = line.indexOf("=\"", i);
                if (eq < 0) {
                    throw new IllegalArgumentException("not a Prometheus sample (a label without =\"): " + line);
                }
                String key = line.substring(i, eq).strip();
                StringBuilder value = new StringBuilder();
                int j = eq + 2;
                for (; j < line.length() && line.charAt(j) != '"'; j++) {
                    char c = line.charAt(j);
                    if (c == '\\' && j + 1 < line.length()) {
                        char next = line.charAt(++j);
                        value.append(next == 'n' ? '\n' : next);
                    } else {
                        value.append(c);
                    }
                }
                if (j >= line.length()) {
                    throw new IllegalArgumentException("not a Prometheus sample (an unterminated label): " + line);
                }
                labels.put(key, value.toString());
                i = j + 1;
                if (i < line.length() && line.charAt(i) == ',') {
                    i++;
                }
            }
            i++;
        }
        String[] rest = line.substring(Math.min(i, line.length())).strip().split("\\s+");
        if (name.isEmpty() || rest.length == 0 || rest[0].isEmpty()) {
            throw new IllegalArgumentException("not a Prometheus sample (no name or no value): " + line);
        }
        try {
            return new Sample(name, Map.copyOf(labels), Double.parseDouble(rest[0].replace("Inf", "Infinity")));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a Prometheus sample (the value is not a number): " + line, e);
        }
    }

    /** Every sample, in the order of the text. */
    public List<Sample> samples() {
        return samples;
    }

    /** Whether any sample's series is named {@code name}. */
    public boolean has(String name) {
        return samples.stream().anyMatch(s -> s.name.equals(name));
    }

    /**
     * The sum of the samples named {@code name} whose labels include each of {@code labelPairs} (key, value,
     * key, value...); 0 when there are none.
     */
    public double sum(String name, String... labelPairs) {
        double sum = 0;
        for (Sample s : samples) {
            if (s.name.equals(name) && matches(s.labels, labelPairs)) {
                sum += s.value;
            }
        }
        return sum;
    }

    /** {@link #sum} as a whole number, for counts. */
    public long count(String name, String... labelPairs) {
        return Math.round(sum(name, labelPairs));
    }

    private static boolean matches(Map<String, String> labels, String[] pairs) {
        if (pairs.length % 2 != 0) {
            throw new IllegalArgumentException("labels come in key, value pairs");
        }
        for (int k = 0; k < pairs.length; k += 2) {
            if (!pairs[k + 1].equals(labels.get(pairs[k]))) {
                return false;
            }
        }
        return true;
    }
}
