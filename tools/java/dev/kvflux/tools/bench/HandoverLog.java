package dev.kvflux.tools.bench;

import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.observe.Handover.Stage;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Every request's handover stages, as the proxy, prefill and decode of one in-process run mark them on one clock
 * ({@link Handover.Listener}), and what they add up to: for each stage, the time from the stage before it, p50 and
 * p99 over the requests that reached both; the handover itself (the last layer ready to decode's first token) and
 * the client's first byte after the proxy took the request in, and prefill's answer (its own first token) beside them.
 * Keeps at most {@link #MAX_REQUESTS} requests (the
 * first ones), so a long run holds a bounded amount. Thread-safe.
 */
public final class HandoverLog implements Handover.Listener {
    /** Requests kept at most; marks of later ones are dropped. */
    public static final int MAX_REQUESTS = 200_000;
    private static final int STAGES = Stage.values().length;

    private final ConcurrentHashMap<String, long[]> marks = new ConcurrentHashMap<>();
    private final AtomicInteger kept = new AtomicInteger();

    @Override
    public void reached(String transferId, Stage stage, long nanoTime) {
        long[] times = marks.get(transferId);
        if (times == null) {
            if (kept.get() >= MAX_REQUESTS) {
                return;
            }
            times = marks.computeIfAbsent(transferId, id -> {
                kept.incrementAndGet();
                long[] fresh = new long[STAGES];
                Arrays.fill(fresh, Long.MIN_VALUE);
                return fresh;
            });
        }
        synchronized (times) {
            if (times[stage.ordinal()] == Long.MIN_VALUE) {
                times[stage.ordinal()] = nanoTime;
            }
        }
    }

    /**
     * One span between two stages: {@code n} requests reached both; the time between them, in milliseconds.
     *
     * @param from the earlier stage's label
     * @param to the later stage's label
     */
    public record Span(String from, String to, int n, double p50Ms, double p99Ms) {
    }

    /**
     * What the log adds up to.
     *
     * @param stages each stage from the one before it, in the order of {@link Stage}, prefill's answer left out
     * @param handover the last layer ready to decode's first token
     * @param afterCopy the last copy's end to decode's first token: the handover without the copy
     * @param clientFirstByte the proxy taking the request in to the client's first byte
     * @param prefillAnswered the proxy taking the request in to prefill's answer (prefill's own first token)
     * @param afterPrefillAnswer prefill's answer to the client's first byte
     */
    public record Figures(List<Span> stages, Span handover, Span afterCopy, Span clientFirstByte, Span prefillAnswered,
                          Span afterPrefillAnswer) {
    }

    /** The spans over every request logged so far. */
    public Figures figures() {
        List<long[]> all = new ArrayList<>(marks.values());
        List<Span> stages = new ArrayList<>();
        List<Stage> order = java.util.Arrays.stream(Stage.values()).filter(s -> s != Stage.PREFILL_ANSWERED).toList();
        for (int i = 1; i < order.size(); i++) {
            stages.add(span(all, order.get(i - 1), order.get(i)));
        }
        return new Figures(stages, span(all, Stage.LAST_LAYER_READY, Stage.FIRST_TOKEN_OUT),
                span(all, Stage.LAST_COPY_ENDED, Stage.FIRST_TOKEN_OUT), span(all, Stage.PROXY_IN, Stage.CLIENT_FIRST_BYTE), span(all, Stage.PROXY_IN, Stage.PREFILL_ANSWERED),
                span(all, Stage.PREFILL_ANSWERED, Stage.CLIENT_FIRST_BYTE));
    }

    private static Span span(List<long[]> all, Stage from, Stage to) {
        double[] ms = new double[all.size()];
        int n = 0;
        for (long[] times : all) {
            long a;
            long b;
            synchronized (times) {
                a = times[from.ordinal()];
                b = times[to.ordinal()];
            }
            if (a != Long.MIN_VALUE && b != Long.MIN_VALUE) {
                ms[n++] = Math.max(0, b - a) / 1e6;
            }
        }
        double[] sorted = Arrays.copyOf(ms, n);
        Arrays.sort(sorted);
        return new Span(from.label(), to.label(), n, percentile(sorted, 50), percentile(sorted, 99));
    }

    /** The nearest-rank percentile of sorted values; NaN when there are none. */
    static double percentile(double[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.ceil(p / 100 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    /** The figures as a text table, one line per stage, then the handover and the client's first byte. */
    public static String table(Figures f) {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "  %-22s %-22s %7s %9s %9s%n", "from", "to", "n", "p50 ms", "p99 ms"));
        for (Span s : f.stages()) {
            out.append(line(s));
        }
        out.append(line(f.handover()).replaceFirst("^  ", "= "));
        out.append(line(f.afterCopy()).replaceFirst("^  ", "= "));
        out.append(line(f.clientFirstByte()).replaceFirst("^  ", "= "));
        out.append(line(f.prefillAnswered()).replaceFirst("^  ", "= "));
        out.append(line(f.afterPrefillAnswer()).replaceFirst("^  ", "= "));
        return out.toString();
    }

    private static String line(Span s) {
        return String.format(Locale.ROOT, "  %-22s %-22s %7d %9s %9s%n", s.from(), s.to(), s.n(), ms(s.p50Ms()),
                ms(s.p99Ms()));
    }

    private static String ms(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.3f", v);
    }
}
