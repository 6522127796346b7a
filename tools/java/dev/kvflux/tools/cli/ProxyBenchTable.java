package dev.kvflux.tools.cli;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/** {@code kvflux proxy-bench}'s figures as two tables: the load's levels, then the faults, one column per proxy. */
final class ProxyBenchTable {
    private ProxyBenchTable() {
    }

    @SuppressWarnings("unchecked")
    static void print(Map<String, Object> figures, PrintStream out) {
        List<String> fronts = List.copyOf(figures.keySet());
        out.printf("%-12s %-16s %10s %10s %10s %8s %10s %10s%n", "concurrency", "proxy", "req/s", "p50 ms", "p99 ms",
                "failed", "cpu cores", "rss MiB");
        Map<String, Object> first = (Map<String, Object>) figures.get(fronts.getFirst());
        int levels = ((List<Object>) first.get("levels")).size();
        for (int i = 0; i < levels; i++) {
            for (String front : fronts) {
                Map<String, Object> row = ((List<Map<String, Object>>) ((Map<String, Object>) figures.get(front))
                        .get("levels")).get(i);
                out.printf("%-12s %-16s %10s %10s %10s %8s %10s %10s%n", row.get("concurrency"), front,
                        row.get("req_per_s"), row.get("p50_ms"), row.get("p99_ms"), row.get("failed"),
                        row.get("proxy_cpu_cores"), row.get("proxy_rss_mib_peak"));
            }
        }
        Map<String, Object> firstFaults = (Map<String, Object>) first.get("faults");
        if (firstFaults == null) {
            return;
        }
        for (String fault : firstFaults.keySet()) {
            out.println();
            out.println("fault " + fault + " (concurrency 16; strikes at 5 s)");
            Map<String, Object> keys = (Map<String, Object>) firstFaults.get(fault);
            for (String key : keys.keySet()) {
                StringBuilder line = new StringBuilder(String.format("  %-30s", key));
                for (String front : fronts) {
                    Object value = ((Map<String, Map<String, Object>>) ((Map<String, Object>) figures.get(front))
                            .get("faults")).get(fault).get(key);
                    line.append(String.format(" %-28s", front + " " + value));
                }
                out.println(line);
            }
        }
    }
}
