package dev.kvflux.tools.repro.gpu;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.bindings.gpu.PushedLayerEvent;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproStrategy;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The seed's reproducer on real GPUs: a prefill process on one GPU writes the seed's geometry (118 layers
 * × 128 blocks × 32 KiB, one batch per layer) into the buffer of a decode child process on another GPU,
 * through {@link GpuCopyEngine} (IPC handle, pooled streams and events), and times each wait strategy.
 *
 * <p>Per request: a compute stream fills each layer's blocks (the stand-in forward pass, one fill value
 * per block and request) and records the layer's event; the layer's batch waits for that event on the GPU,
 * with timing events around its copies. The wait is timed from the last post to its end; the raw copy time
 * is the GPU time from the first copy's start to the last copy's end; the detection lag is the wait's end
 * minus the last copy's end (GPU times placed on the host clock through an event recorded on an idle
 * stream when the request starts). Decode copies its buffer back and compares every byte.
 *
 * <p>Each request also counts the native event queries its statuses made ({@link GpuCopyEngine#eventQueries()}),
 * printed per status. {@code --stream-progress both} runs every strategy twice in one run, first with the
 * engine's shared stream progress on, then with it off (a fresh pair), and prints the ratio of queries per
 * status next to the detection lags.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp ... dev.kvflux.tools.repro.gpu.CudaRepro --requests 30</pre>
 */
public final class CudaRepro {

    private final Options options;
    private final PrintStream out;
    private volatile long lastProgress = System.nanoTime();

    private CudaRepro(Options options, PrintStream out) {
        this.options = options;
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("kvflux gpu repro: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(2);
            return;
        }
        CudaRepro repro = new CudaRepro(options, System.out);
        try {
            int code = options.role.equals("decode") ? repro.decode() : repro.prefill();
            System.exit(code);
        } catch (dev.kvflux.bindings.gpu.GpuException | dev.kvflux.bindings.gpu.GpuLibraryNotFoundException
                | IllegalStateException e) {
            System.out.flush();
            System.err.println("kvflux gpu repro (" + options.role + "): " + e.getMessage());
            System.exit(1);
        }
    }

    // ---------------------------------------------------------------- decode

    private int decode() throws IOException {
        ReproGeometry layout = options.layout;
        GpuRuntime runtime = load();
        try (GpuCopyEngine engine = GpuCopyEngine.open(runtime, "decode", options.dGpu, new GpuCopyEngine.Config(1, 0));
                Arena arena = Arena.ofShared();
                ControlChannel channel = new ControlChannel(
                        new Socket(InetAddress.getLoopbackAddress(), options.port))) {
            MemoryRegion region = engine.registerMemory(layout.regionBytes(), options.dGpu);
            DeviceBuffer buffer = engine.buffer(region);
            channel.sendDescriptor(engine.describe(region).pack());
            ByteVerifier.serve(channel, runtime, buffer, layout, arena);
            return 0;
        }
    }

    // ---------------------------------------------------------------- prefill

    /** One request's figures. */
    record Figures(ReproStrategy strategy, long request, double waitMs, String outcome, int succeeded, int statuses,
            double rawCopyMs, double layerCopyMs, double postMs, double copyEndAfterWaitStartMs, double lagMs,
            long mismatched, int badLayers, boolean sharedProgress, long eventQueries, long waitQueries) {

        double queriesPerStatus() {
            return (double) eventQueries / statuses;
        }

        double waitQueriesPerStatus() {
            return (double) waitQueries / statuses;
        }
    }

    private int prefill() throws Exception {
        ReproGeometry layout = options.layout;
        GpuRuntime runtime = load();
        out.printf(Locale.ROOT, "runtime: %s, runtime version %d, driver version %d%n", runtime,
                runtime.runtimeVersion(), runtime.driverVersion());
        int devices = runtime.deviceCount();
        out.printf(Locale.ROOT, "devices: %d; prefill GPU %d, decode GPU %d; peer access %d->%d: %s%n", devices,
                options.pGpu, options.dGpu, options.pGpu, options.dGpu,
                runtime.canAccessPeer(options.pGpu, options.dGpu));
        out.printf(Locale.ROOT, "stand-in forward pass: %d bytes written per layer before its fills%n",
                options.forwardBytes);
        out.printf(Locale.ROOT, "copy path: %s; %d streams%n", options.copyPathDescription(), options.streams);
        out.printf(Locale.ROOT, "geometry: %d layers x %d blocks x %d B = %.1f MiB per request, buffer %.1f MiB;"
                + " transfer timeout %s%n", layout.layers(), layout.blocks(), layout.blockBytes(),
                layout.requestBytes() / 1048576.0, layout.regionBytes() / 1048576.0, options.timeout);
        startWatchdog();
        selfCheck(runtime);
        out.flush();
        List<Figures> all = new ArrayList<>();
        List<Integer> decodeExits = new ArrayList<>();
        for (boolean shared : options.streamProgress) {
            out.println("stream progress: " + progressLabel(shared));
            try (PrefillPair pair = PrefillPair.open(runtime, layout, options.pGpu, options.dGpu,
                    options.forwardBytes, options.engineConfig(shared), options.timeout, out)) {
                all.addAll(run(pair, shared));
                pair.close();
                decodeExits.add(pair.decodeExitCode());
            }
        }
        report(all);
        out.println("decode exited: code " + decodeExits.stream().map(String::valueOf)
                .collect(java.util.stream.Collectors.joining(", ")));
        long mismatched = all.stream().mapToLong(Figures::mismatched).sum();
        return mismatched == 0 ? 0 : 1;
    }

    /** Both layer events on the prefill GPU: the polled one and the pushed one (host function). */
    private void selfCheck(GpuRuntime runtime) {
        int gpu = options.pGpu;
        try (DeviceBuffer scratch = runtime.allocate(gpu, 64L << 20);
                GpuStream stream = runtime.createStream(gpu);
                GpuEvent polled = runtime.createEvent(gpu, false);
                GpuEvent pushedEvent = runtime.createEvent(gpu, false)) {
            stream.memsetAsync(scratch.address(), 7, scratch.size());
            polled.record(stream);
            long start = System.nanoTime();
            int polls = 1;
            while (polled.query() != dev.kvflux.bindings.EventState.READY) {
                polls++;
            }
            double polledUs = (System.nanoTime() - start) / 1e3;
            stream.memsetAsync(scratch.address(), 9, scratch.size());
            start = System.nanoTime();
            PushedLayerEvent pushed = PushedLayerEvent.recordOn(stream, pushedEvent);
            pushed.ready().block(Duration.ofSeconds(10));
            double pushedUs = (System.nanoTime() - start) / 1e3;
            out.printf(Locale.ROOT, "layer events: polled ready after %d queries (%.1f us); pushed ready after %.1f us,"
                    + " query then says %s%n", polls, polledUs, pushedUs, pushed.query());
        }
    }

    private List<Figures> run(PrefillPair pair, boolean shared) {
        List<Figures> all = new ArrayList<>();
        long next = 0;
        out.println("warm-up: 1 request, reactive wait, and 1 request, reactive-push wait (not counted)");
        for (ReproStrategy warmUp : List.of(ReproStrategy.REACTIVE, ReproStrategy.REACTIVE_PUSH)) {
            Figures f = request(pair, warmUp, next++, shared);
            print(f);
            if (f.succeeded() != f.statuses() || f.mismatched() != 0) {
                // A copy path that does not work fails here, in seconds, rather than request after request.
                throw new IllegalStateException("the warm-up request failed (" + f.succeeded() + " of "
                        + f.statuses() + " statuses succeeded, " + f.mismatched() + " mismatched bytes, copy path "
                        + options.copyPathDescription() + "); not timing anything");
            }
        }
        for (ReproStrategy strategy : options.strategies) {
            int n = strategy == ReproStrategy.NATIVE ? options.nativeRequests : options.requests;
            for (int i = 0; i < n; i++) {
                Figures f = request(pair, strategy, next++, shared);
                print(f);
                all.add(f);
            }
        }
        return all;
    }

    /** One request: post every layer behind its fill, time the strategy's wait, measure, verify. */
    private Figures request(PrefillPair pair, ReproStrategy strategy, long request, boolean shared) {
        ReproGeometry layout = options.layout;
        pair.startRequest();
        long queriesBefore = pair.engine().eventQueries();
        long postStart = System.nanoTime();
        List<PushedStatus> statuses = new ArrayList<>(layout.layers());
        for (int l = 0; l < layout.layers(); l++) {
            pair.fill(request, l);
            statuses.add(pair.write(l, pair.session().allocateTransferUid(), strategy.push()));
        }
        long waitStart = System.nanoTime();
        long queriesAtWait = pair.engine().eventQueries();
        String outcome = await(strategy.wait(pair.engine(), options.timeout), statuses);
        long waitEnd = System.nanoTime();
        int succeeded = 0;
        String firstFailure = null;
        for (PushedStatus s : statuses) {
            if (s.code() == StatusCode.SUCCESS) {
                succeeded++;
            } else if (firstFailure == null && s.code().isTerminal()) {
                firstFailure = s.code() + ": " + s.message();
            }
        }
        // Every status is settled here (or the wait gave up): no query of this request's statuses follows.
        long queriesAfter = pair.engine().eventQueries();
        if (firstFailure != null) {
            out.println("request " + request + ": a status failed: " + firstFailure);
        }
        PrefillPair.Measurement m = pair.finish(request, waitStart, waitEnd);
        return new Figures(strategy, request, (waitEnd - waitStart) / 1e6, outcome, succeeded, statuses.size(),
                m.rawCopyMs(), m.layerCopyMs(), (waitStart - postStart) / 1e6, m.copyEndAfterWaitStartMs(), m.lagMs(),
                m.mismatchedBytes(), m.badLayers(), shared, queriesAfter - queriesBefore, queriesAfter - queriesAtWait);
    }

    /**
     * Blocks the calling thread (the reproducer's own, never a Reactor non-blocking one) until the wait
     * ends, and returns "ok" or the error's message, as the seed's reproducer prints it.
     */
    static String await(WaitStrategy wait, List<? extends TransferStatus> statuses) {
        try {
            wait.await(statuses).block();
            return "ok";
        } catch (TransferException e) {
            return e.getMessage();
        }
    }

    private static String progressLabel(boolean shared) {
        return shared ? "shared" : "unshared";
    }

    // ---------------------------------------------------------------- report

    /** Ends the run with every thread's stack if nothing progresses for the timeout plus a minute. */
    private void startWatchdog() {
        long limit = options.timeout.toNanos() + Duration.ofSeconds(60).toNanos();
        Thread t = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                if (System.nanoTime() - lastProgress > limit) {
                    out.println("no progress for " + Duration.ofNanos(limit) + "; threads:");
                    Thread.getAllStackTraces().forEach((thread, stack) -> {
                        out.println(thread);
                        for (StackTraceElement e : stack) {
                            out.println("    at " + e);
                        }
                    });
                    out.flush();
                    Runtime.getRuntime().halt(3);
                }
            }
        }, "kvflux-repro-watchdog");
        t.setDaemon(true);
        t.start();
    }

    private void print(Figures f) {
        lastProgress = System.nanoTime();
        out.printf(Locale.ROOT, "%-13s request %3d: wait %9.3f ms, %d/%d statuses succeeded, %s; raw copy %.3f ms,"
                + " layer copy median %.4f ms, posting %.3f ms, copies ended %.3f ms after the wait began,"
                + " detection lag %.3f ms; %d mismatched bytes; %d native event queries (%.2f per status, %.2f"
                + " of them in the wait; stream progress %s)%n", f.strategy().label(), f.request(), f.waitMs(),
                f.succeeded(), f.statuses(), f.outcome(), f.rawCopyMs(), f.layerCopyMs(), f.postMs(),
                f.copyEndAfterWaitStartMs(), f.lagMs(), f.mismatched(), f.eventQueries(), f.queriesPerStatus(),
                f.waitQueriesPerStatus(), progressLabel(f.sharedProgress()));
        out.flush();
    }

    private void report(List<Figures> all) throws IOException {
        Map<String, List<Figures>> by = new LinkedHashMap<>();
        for (Figures f : all) {
            by.computeIfAbsent(f.strategy().label() + "|" + progressLabel(f.sharedProgress()), k -> new ArrayList<>())
                    .add(f);
        }
        StringBuilder md = new StringBuilder();
        md.append("| strategy | stream progress | waits timed | wait median (ms) | wait min / max (ms)"
                + " | statuses succeeded | raw copy median (ms) | raw copy min / max (ms) | layer copy median (ms)"
                + " | posting median (ms)"
                + " | copy left at wait start, median (ms) | wait / raw copy (median) | detection lag"
                + " median (ms) | lag min / max (ms) | native event queries per status (all requests)"
                + " | per request median | of them in the wait | mismatched bytes |\n");
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        List<Map<String, Object>> json = new ArrayList<>();
        for (List<Figures> fs : by.values()) {
            Summary sum = Summary.of(fs);
            Figures first = fs.get(0);
            double[] wait = fs.stream().mapToDouble(Figures::waitMs).toArray();
            double[] copy = fs.stream().mapToDouble(Figures::rawCopyMs).toArray();
            double[] layer = fs.stream().mapToDouble(Figures::layerCopyMs).toArray();
            double[] post = fs.stream().mapToDouble(Figures::postMs).toArray();
            double[] left = fs.stream().mapToDouble(Figures::copyEndAfterWaitStartMs).toArray();
            double[] ratio = fs.stream().mapToDouble(f -> f.waitMs() / f.rawCopyMs()).toArray();
            long ok = fs.stream().filter(f -> f.succeeded() == f.statuses()).count();
            long outcomesOk = fs.stream().filter(f -> f.outcome().equals("ok")).count();
            md.append(String.format(Locale.ROOT,
                    "| %s | %s | %d | %.3f | %.3f / %.3f | %d of %d requests all %d (%d waits ok) | %.3f | %.3f / %.3f"
                            + " | %.4f | %.3f | %.3f | %.3f | %.3f | %.3f / %.3f | %.2f | %.2f | %.2f | %d |\n",
                    first.strategy().label(), progressLabel(first.sharedProgress()), fs.size(), median(wait),
                    min(wait), max(wait), ok, fs.size(), first.statuses(), outcomesOk, median(copy), min(copy),
                    max(copy), median(layer), median(post), median(left), median(ratio),
                    sum.lagMedianMs(), sum.lagMinMs(), sum.lagMaxMs(), sum.queriesPerStatus(),
                    sum.queriesPerStatusMedian(), sum.waitQueriesPerStatus(), sum.mismatched()));
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("strategy", first.strategy().label());
            row.put("streamProgress", progressLabel(first.sharedProgress()));
            row.put("requests", fs.size());
            row.put("requestsAllSucceeded", ok);
            row.put("statusesPerRequest", first.statuses());
            row.put("waitMedianMs", median(wait));
            row.put("rawCopyMedianMs", median(copy));
            row.put("detectionLagMedianMs", sum.lagMedianMs());
            row.put("detectionLagMinMs", sum.lagMinMs());
            row.put("detectionLagMaxMs", sum.lagMaxMs());
            row.put("eventQueries", sum.eventQueries());
            row.put("eventQueriesPerStatus", sum.queriesPerStatus());
            row.put("eventQueriesPerStatusMedianOfRequests", sum.queriesPerStatusMedian());
            row.put("waitEventQueriesPerStatus", sum.waitQueriesPerStatus());
            row.put("mismatchedBytes", sum.mismatched());
            json.add(row);
        }
        out.println();
        out.println("copy path: " + options.copyPathDescription());
        out.print(md);
        List<String> ratios = ratioLines(all);
        ratios.forEach(out::println);
        out.flush();
        if (options.report != null) {
            Files.writeString(options.report, "<!-- " + Instant.now() + " -->\n" + md + String.join("\n", ratios)
                    + (ratios.isEmpty() ? "" : "\n"));
        }
        if (options.json != null) {
            Map<String, Object> doc = new LinkedHashMap<>();
            doc.put("at", Instant.now().toString());
            doc.put("copyPath", options.copyPathDescription());
            doc.put("forwardBytes", options.forwardBytes);
            doc.put("transferTimeoutMs", options.timeout.toMillis());
            doc.put("strategies", json);
            new com.fasterxml.jackson.databind.ObjectMapper()
                    .enable(com.fasterxml.jackson.databind.SerializationFeature.INDENT_OUTPUT)
                    .writeValue(options.json.toFile(), doc);
        }
    }

    /** A strategy's figures under one stream-progress setting: lags and native event queries. */
    record Summary(double lagMedianMs, double lagMinMs, double lagMaxMs, long eventQueries, long waitQueries,
            long statuses, double queriesPerStatusMedian, long mismatched) {

        static Summary of(List<Figures> fs) {
            double[] lag = fs.stream().mapToDouble(Figures::lagMs).toArray();
            double[] perStatus = fs.stream().mapToDouble(Figures::queriesPerStatus).toArray();
            return new Summary(median(lag), min(lag), max(lag), fs.stream().mapToLong(Figures::eventQueries).sum(),
                    fs.stream().mapToLong(Figures::waitQueries).sum(), fs.stream().mapToLong(Figures::statuses).sum(),
                    median(perStatus),
                    fs.stream().mapToLong(Figures::mismatched).sum());
        }

        /** Native event queries per status over all the requests. */
        double queriesPerStatus() {
            return (double) eventQueries / statuses;
        }

        /** Native event queries per status made from the wait's start on (the rest were made while posting). */
        double waitQueriesPerStatus() {
            return (double) waitQueries / statuses;
        }
    }

    /**
     * For each strategy run both with and without shared stream progress: how many times more native event
     * queries per status the unshared run made, beside both detection lags.
     */
    static List<String> ratioLines(List<Figures> all) {
        List<String> lines = new ArrayList<>();
        for (ReproStrategy strategy : ReproStrategy.values()) {
            List<Figures> shared = all.stream().filter(f -> f.strategy() == strategy && f.sharedProgress()).toList();
            List<Figures> unshared = all.stream().filter(f -> f.strategy() == strategy && !f.sharedProgress())
                    .toList();
            if (shared.isEmpty() || unshared.isEmpty()) {
                continue;
            }
            Summary on = Summary.of(shared);
            Summary off = Summary.of(unshared);
            lines.add(String.format(Locale.ROOT, "%s: native event queries per status %.2f unshared, %.2f shared"
                    + " (%s fewer shared); in the wait alone %.2f unshared, %.2f shared (%s fewer shared);"
                    + " detection lag median %.3f ms unshared, %.3f ms shared", strategy.label(),
                    off.queriesPerStatus(), on.queriesPerStatus(), times(off.queriesPerStatus(), on.queriesPerStatus()),
                    off.waitQueriesPerStatus(), on.waitQueriesPerStatus(),
                    times(off.waitQueriesPerStatus(), on.waitQueriesPerStatus()),
                    off.lagMedianMs(), on.lagMedianMs()));
        }
        return lines;
    }

    /** How many times {@code fewer} goes into {@code more} ("all" when {@code fewer} is 0). */
    private static String times(double more, double fewer) {
        return fewer == 0 ? "all" : String.format(Locale.ROOT, "%.1fx", more / fewer);
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static double min(double[] v) {
        return Arrays.stream(v).min().orElse(Double.NaN);
    }

    private static double max(double[] v) {
        return Arrays.stream(v).max().orElse(Double.NaN);
    }

    private GpuRuntime load() {
        String library = System.getProperty(GpuRuntime.LIBRARY_PROPERTY);
        return library != null ? GpuRuntime.load(options.platform, Path.of(library)) : GpuRuntime.load(options.platform);
    }

    // ---------------------------------------------------------------- options

    /** Command-line options, with the seed's values as defaults. */
    static final class Options {
        static final String USAGE = """
                usage: CudaRepro [--runtime cuda|hip] [--p-gpu 0] [--d-gpu 1] [--requests 20] [--native-requests 2]
                                 [--transfer-timeout 30s] [--strategies native,sliced-native,reactive,reactive-push]
                                 [--copy-path memcpy|scatter-gather] [--scatter-gather-threshold N]
                                 [--layers 118] [--blocks 128] [--block-bytes 32768] [--forward-bytes 0] [--report FILE]
                                 [--stream-progress shared|unshared|both] [--streams 64] [--json FILE]
                  --forward-bytes N: before each layer's fills, the compute stream also writes N bytes of a
                  scratch buffer, a stand-in for the layer's forward pass, so the GPU runs behind the posting
                  as in a real prefill (0: the GPU only fills the blocks and keeps up with the posting).
                  --copy-path: memcpy (default) posts one cudaMemcpyAsync per block; scatter-gather posts one
                  kernel per batch for batches of more than --scatter-gather-threshold blocks (default 0: all).
                  --stream-progress: shared (default) lets statuses on one stream share what their event queries
                  saw; unshared queries each status's own event; both runs every strategy shared, then unshared,
                  and prints how many times fewer native event queries per status the sharing made.
                  --streams N: the prefill engine's stream pool (MoRI's default 64; batches take them in turn).
                  --json FILE: the per-strategy summary, queries per status and detection lags included.""";
        String role = "prefill";
        GpuPlatform platform = GpuPlatform.CUDA;
        int pGpu = 0;
        int dGpu = 1;
        int port;
        int requests = 20;
        int nativeRequests = 2;
        Duration timeout = Duration.ofSeconds(30);
        List<ReproStrategy> strategies = List.of(ReproStrategy.values());
        ReproGeometry layout = ReproGeometry.SEED;
        Path report;
        Path json;
        List<Boolean> streamProgress = List.of(true);
        int streams = GpuCopyEngine.Config.DEFAULT.streams();
        long forwardBytes;
        int scatterGatherThreshold = GpuCopyEngine.Config.SCATTER_GATHER_OFF;
        boolean thresholdGiven;

        static Options parse(String[] args) {
            Options o = new Options();
            int threshold = 0;
            int layers = ReproGeometry.SEED.layers();
            int blocks = ReproGeometry.SEED.blocks();
            long blockBytes = ReproGeometry.SEED.blockBytes();
            for (int i = 0; i < args.length; i++) {
                String name = args[i];
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(name + " needs a value");
                }
                String value = args[++i];
                try {
                    switch (name) {
                        case "--role" -> o.role = value;
                        case "--runtime" -> o.platform = GpuPlatform.named(value);
                        case "--p-gpu" -> o.pGpu = Integer.parseInt(value);
                        case "--d-gpu" -> o.dGpu = Integer.parseInt(value);
                        case "--port" -> o.port = Integer.parseInt(value);
                        case "--requests" -> o.requests = Integer.parseInt(value);
                        case "--native-requests" -> o.nativeRequests = Integer.parseInt(value);
                        case "--transfer-timeout" -> o.timeout = duration(name, value);
                        case "--strategies" -> o.strategies = Arrays.stream(value.split(","))
                                .map(ReproStrategy::named).toList();
                        case "--layers" -> layers = Integer.parseInt(value);
                        case "--blocks" -> blocks = Integer.parseInt(value);
                        case "--block-bytes" -> blockBytes = Long.parseLong(value);
                        case "--report" -> o.report = Path.of(value);
                        case "--json" -> o.json = Path.of(value);
                        case "--streams" -> o.streams = Integer.parseInt(value);
                        case "--stream-progress" -> o.streamProgress = switch (value) {
                            case "shared" -> List.of(true);
                            case "unshared" -> List.of(false);
                            case "both" -> List.of(true, false);
                            default -> throw new IllegalArgumentException(
                                    "--stream-progress is shared, unshared or both, got '" + value + "'");
                        };
                        case "--forward-bytes" -> o.forwardBytes = Long.parseLong(value);
                        case "--copy-path" -> o.scatterGatherThreshold = switch (value) {
                            case "memcpy" -> GpuCopyEngine.Config.SCATTER_GATHER_OFF;
                            case "scatter-gather" -> 0;
                            default -> throw new IllegalArgumentException(
                                    "--copy-path is memcpy or scatter-gather, got '" + value + "'");
                        };
                        case "--scatter-gather-threshold" -> {
                            o.thresholdGiven = true;
                            threshold = Integer.parseInt(value);
                        }
                        default -> throw new IllegalArgumentException("unknown option " + name);
                    }
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException(name + " takes a number, got '" + value + "'");
                }
            }
            if (!o.role.equals("prefill") && !o.role.equals("decode")) {
                throw new IllegalArgumentException("--role is prefill or decode, got " + o.role);
            }
            if (o.streams < 1) {
                throw new IllegalArgumentException("--streams must be at least 1, got " + o.streams);
            }
            if (o.requests < 1 || o.nativeRequests < 1) {
                throw new IllegalArgumentException("--requests and --native-requests must be at least 1");
            }
            if (o.thresholdGiven) {
                if (o.scatterGatherThreshold == GpuCopyEngine.Config.SCATTER_GATHER_OFF) {
                    throw new IllegalArgumentException("--scatter-gather-threshold needs --copy-path scatter-gather");
                }
                if (threshold < 0) {
                    throw new IllegalArgumentException("--scatter-gather-threshold is a block count, 0 or more, got "
                            + threshold);
                }
                o.scatterGatherThreshold = threshold;
            }
            o.layout = new ReproGeometry(layers, blocks, blockBytes);
            return o;
        }

        /** The prefill engine: this run's pools, copy path and first stream-progress setting. */
        GpuCopyEngine.Config engineConfig() {
            return engineConfig(streamProgress.get(0));
        }

        /**
         * The prefill engine: {@code --streams} streams, MoRI's default events, this run's copy path, stream
         * progress {@code shared} or not.
         */
        GpuCopyEngine.Config engineConfig(boolean shared) {
            return new GpuCopyEngine.Config(streams, GpuCopyEngine.Config.DEFAULT.events(), scatterGatherThreshold,
                    shared);
        }

        /** A duration as {@link Durations#parse} reads it, in any case: {@code 30s}, {@code 500MS}, {@code 2.5}. */
        static Duration duration(String option, String value) {
            try {
                return Durations.parse(value.toLowerCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(option + " takes 30s, 500ms or seconds, got '" + value + "'");
            }
        }

        String copyPathDescription() {
            return scatterGatherThreshold == GpuCopyEngine.Config.SCATTER_GATHER_OFF
                    ? "memcpy (one cudaMemcpyAsync per merged segment)"
                    : "scatter-gather (one kernel per batch of more than " + scatterGatherThreshold + " blocks)";
        }
    }
}
