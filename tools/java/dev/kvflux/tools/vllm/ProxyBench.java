package dev.kvflux.tools.vllm;

import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.vllm.VllmPinger;
import dev.kvflux.serving.vllm.VllmRegistration;
import dev.kvflux.tools.bench.Blackhole;
import dev.kvflux.transfer.KvMode;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * {@code kvflux proxy-bench}: vLLM's toy proxy and kvflux's, one after the other, each in a process of its own in
 * front of the same kind of vLLM instance doubles (two prefills and two decodes that register over ZeroMQ as vLLM's
 * connector does and answer at once), under a closed-loop load: requests a second, p50 and p99 latency, the proxy
 * process's CPU and RSS, at each concurrency; then, at concurrency 16, each fault on a fresh deployment, and what the
 * clients saw: one of two decodes killed and not restarted, a prefill answering 500, a blackholed decode, a decode
 * back on another HTTP port, and 10,000 malformed registration frames.
 */
public final class ProxyBench {
    /**
     * @param concurrencies the load's levels
     * @param level how long each level runs (after a second of warm-up)
     * @param faultRun how long each fault's run lasts; the fault strikes 5 s in
     * @param faults whether the faults run
     * @param work where the proxies' logs go
     */
    public record Settings(List<Integer> concurrencies, Duration level, Duration faultRun, boolean faults, Path work) {
    }

    private static final long FAULT_AT_NANOS = Duration.ofSeconds(5).toNanos();
    /** The window after a fault that says whether service is back: from 15 s after it to the run's end. */
    private static final long RECOVERED_AFTER_NANOS = Duration.ofSeconds(15).toNanos();

    private final Settings settings;
    private final PrintStream progress;

    public ProxyBench(Settings settings, PrintStream progress) {
        this.settings = settings;
        this.progress = progress;
    }

    /** Runs both proxies; their figures, by proxy, then by level and by fault. */
    public Map<String, Object> run() throws Exception {
        Map<String, Object> figures = new LinkedHashMap<>();
        for (String front : List.of("vllm-toy-proxy", "kvflux-proxy")) {
            Map<String, Object> mine = new LinkedHashMap<>();
            mine.put("levels", levels(front));
            if (settings.faults()) {
                Map<String, Object> faults = new LinkedHashMap<>();
                for (String fault : List.of("decode-kill", "prefill-500", "blackhole-decode", "decode-new-port",
                        "malformed-flood")) {
                    faults.put(fault, fault(front, fault));
                }
                mine.put("faults", faults);
            }
            figures.put(front, mine);
        }
        return figures;
    }

    private FrontProcess start(String front) throws Exception {
        return front.equals("vllm-toy-proxy") ? FrontProcess.toy(settings.work()) : FrontProcess.kvflux(settings.work());
    }

    /** Two prefills and two decodes, WRITE, one rank each, registered with {@code front}. */
    private static List<VllmDouble> doubles(FrontProcess front) {
        List<VllmDouble> all = new ArrayList<>();
        int port = 26301;
        for (Role role : List.of(Role.PREFILL, Role.PREFILL, Role.DECODE, Role.DECODE)) {
            all.add(VllmDouble.start(role, KvMode.WRITE, 1, port, port + 100).registerWith(front.discovery(),
                    VllmPinger.INTERVAL));
            port += 1;
        }
        return all;
    }

    private static void awaitServing(FrontProcess front) throws InterruptedException {
        Thread.sleep(1_500);
        try (BenchLoad probe = BenchLoad.start(front.port(), 1)) {
            Thread.sleep(500);
        }
    }

    private List<Map<String, Object>> levels(String name) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        try (FrontProcess front = start(name)) {
            List<VllmDouble> doubles = doubles(front);
            try {
                awaitServing(front);
                for (int concurrency : settings.concurrencies()) {
                    progress.printf("proxy-bench: %s at concurrency %d for %d s%n", name, concurrency,
                            settings.level().toSeconds());
                    rows.add(level(front, concurrency));
                }
            } finally {
                doubles.forEach(VllmDouble::close);
            }
        }
        return rows;
    }

    private Map<String, Object> level(FrontProcess front, int concurrency) throws Exception {
        double rssBefore = front.rssMib();
        double rssPeak = rssBefore;
        BenchLoad load = BenchLoad.start(front.port(), concurrency);
        Thread.sleep(1_000);
        long from = System.nanoTime();
        double cpuFrom = front.cpuSeconds();
        long until = from + settings.level().toNanos();
        while (System.nanoTime() < until) {
            Thread.sleep(200);
            rssPeak = Math.max(rssPeak, front.rssMib());
        }
        long to = System.nanoTime();
        double cpu = front.cpuSeconds() - cpuFrom;
        load.close();
        List<BenchLoad.Sample> window = load.startedBetween(from, to);
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("concurrency", concurrency);
        row.put("requests", window.size());
        row.put("req_per_s", round(window.stream().filter(BenchLoad.Sample::ok).count() / ((to - from) / 1e9)));
        row.put("p50_ms", round(BenchLoad.percentile(window, 50)));
        row.put("p99_ms", round(BenchLoad.percentile(window, 99)));
        row.put("failed", window.stream().filter(s -> !s.ok()).count());
        row.put("failures", failures(window));
        row.put("proxy_cpu_cores", round(cpu / ((to - from) / 1e9)));
        row.put("proxy_rss_mib_peak", round(rssPeak));
        return row;
    }

    private Map<String, Object> fault(String name, String fault) throws Exception {
        progress.printf("proxy-bench: %s, fault %s for %d s%n", name, fault, settings.faultRun().toSeconds());
        try (FrontProcess front = start(name)) {
            List<VllmDouble> doubles = doubles(front);
            List<AutoCloseable> extra = new ArrayList<>();
            Map<String, Object> row = new LinkedHashMap<>();
            try {
                if (fault.equals("prefill-500")) {
                    // decode answers a second late, as a decode waiting for its KV does
                    doubles.get(2).answerDelayMillis.set(1_000);
                    doubles.get(3).answerDelayMillis.set(1_000);
                }
                awaitServing(front);
                double rssBefore = front.rssMib();
                BenchLoad load = BenchLoad.start(front.port(), 16);
                long start = System.nanoTime();
                Thread.sleep(FAULT_AT_NANOS / 1_000_000);
                long struck = System.nanoTime();
                strike(fault, front, doubles, extra, row);
                double rssPeak = rssBefore;
                long until = start + settings.faultRun().toNanos();
                while (System.nanoTime() < until) {
                    Thread.sleep(200);
                    rssPeak = Math.max(rssPeak, front.rssMib());
                }
                long end = System.nanoTime();
                load.close();
                List<BenchLoad.Sample> after = load.startedBetween(struck, end);
                List<BenchLoad.Sample> recovered = load.startedBetween(struck + RECOVERED_AFTER_NANOS, end);
                row.put("requests_after_fault", after.size());
                row.put("failed_after_fault", after.stream().filter(s -> !s.ok()).count());
                row.put("never_finished", load.samples().stream().filter(s -> "no answer in 30 s".equals(s.error()))
                        .count() + load.unfinished());
                row.put("success_pct_15s_after", round(BenchLoad.successPct(recovered)));
                row.put("failures", failures(after));
                row.put("back_after_s", backAfter(after, struck));
                row.put("proxy_rss_mib_growth", round(rssPeak - rssBefore));
                row.put("proxy_alive", front.rssMib() > 0);
                if (fault.equals("prefill-500")) {
                    prefillFailureFigures(doubles, after, row);
                }
                if (fault.equals("malformed-flood")) {
                    row.put("new_instance_served", !doubles.getLast().received().isEmpty());
                }
            } finally {
                doubles.forEach(VllmDouble::close);
                for (AutoCloseable c : extra) {
                    c.close();
                }
            }
            return row;
        }
    }

    private static void strike(String fault, FrontProcess front, List<VllmDouble> doubles, List<AutoCloseable> extra,
            Map<String, Object> row) throws Exception {
        switch (fault) {
            case "decode-kill" -> doubles.get(3).close();
            case "prefill-500" -> doubles.get(1).failWith.set(500);
            case "blackhole-decode" -> {
                Blackhole hole = Blackhole.open(1024);
                extra.add(hole);
                InetSocketAddress http = InetSocketAddress.createUnresolved("127.0.0.1", hole.address().getPort());
                VllmRegistration registration = new VllmRegistration(Role.DECODE, http,
                        "host:127.0.0.1,handshake:26350,notify:26450", "127.0.0.1", 26350, 26450, 1, 1, KvMode.WRITE);
                VllmPinger pinger = VllmPinger.start(front.discovery(), registration, VllmPinger.INTERVAL);
                extra.add(pinger);
            }
            case "decode-new-port" -> {
                VllmRegistration old = doubles.get(3).registration();
                doubles.get(3).close();
                VllmDouble again = VllmDouble.start(Role.DECODE, KvMode.WRITE, 1, old.handshakePort(),
                        old.notifyPort()).registerWith(front.discovery(), VllmPinger.INTERVAL);
                doubles.add(again);
            }
            case "malformed-flood" -> {
                row.put("malformed_frames", flood(front.discovery(), 10_000));
                VllmDouble late = VllmDouble.start(Role.DECODE, KvMode.WRITE, 1, 26360, 26460)
                        .registerWith(front.discovery(), VllmPinger.INTERVAL);
                doubles.add(late);
            }
            default -> throw new IllegalArgumentException("no fault " + fault);
        }
    }

    /**
     * Sends {@code frames} malformed frames to a discovery port; how many were sent. A port that stopped reading (vLLM's
     * toy proxy's listener ends at its first undecodable frame) fills ZeroMQ's queue, and the flood ends at the first
     * frame not taken within 1 s.
     */
    private static int flood(String discovery, int frames) {
        try (ZContext context = new ZContext(1)) {
            ZMQ.Socket socket = context.createSocket(SocketType.DEALER);
            socket.setSendTimeOut(1_000);
            socket.setLinger(2_000);
            socket.connect("tcp://" + discovery);
            byte[][] bad = {{(byte) 0xc1}, {(byte) 0x90}, new byte[64], "{\"type\": \"P\"}".getBytes()};
            int sent = 0;
            while (sent < frames && socket.send(bad[sent % bad.length], 0)) {
                sent++;
            }
            return sent;
        }
    }

    /**
     * What clients were told while a prefill failed: how many requests' prefill leg failed, how many of those reached
     * the client as an error, and how many decode legs ran to their end although their prefill had failed.
     */
    private static void prefillFailureFigures(List<VllmDouble> doubles, List<BenchLoad.Sample> after,
            Map<String, Object> row) {
        java.util.Set<String> failedPrefills = doubles.get(1).failedIds;
        long decodeCompleted = doubles.subList(2, 4).stream().flatMap(d -> d.answered.stream())
                .filter(failedPrefills::contains).count();
        row.put("prefill_legs_failed", failedPrefills.size());
        row.put("client_errors", after.stream().filter(s -> !s.ok()).count());
        row.put("client_error_p99_ms", round(percentileOf(after.stream().filter(s -> !s.ok())
                .mapToDouble(BenchLoad.Sample::millis).toArray(), 99)));
        row.put("decode_answered_without_kv", decodeCompleted);
    }

    private static double percentileOf(double[] values, double p) {
        if (values.length == 0) {
            return Double.NaN;
        }
        double[] sorted = values.clone();
        java.util.Arrays.sort(sorted);
        return sorted[Math.max(0, (int) Math.ceil(p / 100.0 * sorted.length) - 1)];
    }

    /** Seconds from the fault until the first second in which every request that started in it succeeded. */
    private static double backAfter(List<BenchLoad.Sample> after, long struck) {
        TreeMap<Long, boolean[]> bySecond = new TreeMap<>();
        for (BenchLoad.Sample s : after) {
            long second = (s.startNanos() - struck) / 1_000_000_000L;
            boolean[] allOk = bySecond.computeIfAbsent(second, k -> new boolean[] {true});
            allOk[0] &= s.ok();
        }
        for (Map.Entry<Long, boolean[]> entry : bySecond.entrySet()) {
            boolean restFine = bySecond.tailMap(entry.getKey()).values().stream().allMatch(b -> b[0]);
            if (restFine) {
                return entry.getKey();
            }
        }
        return Double.NaN;
    }

    private static Map<String, Long> failures(List<BenchLoad.Sample> samples) {
        Map<String, Long> byKind = new TreeMap<>();
        for (BenchLoad.Sample s : samples) {
            if (!s.ok()) {
                byKind.merge((s.status() == 0 ? "" : s.status() + " ") + s.error(), 1L, Long::sum);
            }
        }
        return byKind;
    }

    private static double round(double v) {
        return Double.isNaN(v) ? v : Math.round(v * 100) / 100.0;
    }
}
