package dev.kvflux.pipeline.gpu;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.bindings.gpu.PushedLayerEvent;
import dev.kvflux.pipeline.repro.ReproGeometry;
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
 * <pre>java --enable-native-access=ALL-UNNAMED -cp ... dev.kvflux.pipeline.gpu.CudaRepro --requests 30</pre>
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
            long mismatched, int badLayers) {
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
        out.printf(Locale.ROOT, "copy path: %s%n", options.copyPathDescription());
        out.printf(Locale.ROOT, "geometry: %d layers x %d blocks x %d B = %.1f MiB per request, buffer %.1f MiB;"
                + " transfer timeout %s%n", layout.layers(), layout.blocks(), layout.blockBytes(),
                layout.requestBytes() / 1048576.0, layout.regionBytes() / 1048576.0, options.timeout);
        startWatchdog();
        selfCheck(runtime);
        out.flush();
        List<Figures> all;
        int decodeExit;
        try (PrefillPair pair = PrefillPair.open(runtime, layout, options.pGpu, options.dGpu, options.forwardBytes,
                options.engineConfig(), options.timeout, out)) {
            all = run(pair);
            pair.close();
            decodeExit = pair.decodeExitCode();
        }
        report(all);
        out.println("decode exited: code " + decodeExit);
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

    private List<Figures> run(PrefillPair pair) {
        List<Figures> all = new ArrayList<>();
        long next = 0;
        out.println("warm-up: 1 request, reactive wait, and 1 request, reactive-push wait (not counted)");
        for (ReproStrategy warmUp : List.of(ReproStrategy.REACTIVE, ReproStrategy.REACTIVE_PUSH)) {
            Figures f = request(pair, warmUp, next++);
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
                Figures f = request(pair, strategy, next++);
                print(f);
                all.add(f);
            }
        }
        return all;
    }

    /** One request: post every layer behind its fill, time the strategy's wait, measure, verify. */
    private Figures request(PrefillPair pair, ReproStrategy strategy, long request) {
        ReproGeometry layout = options.layout;
        pair.startRequest();
        long postStart = System.nanoTime();
        List<PushedStatus> statuses = new ArrayList<>(layout.layers());
        for (int l = 0; l < layout.layers(); l++) {
            pair.fill(request, l);
            statuses.add(pair.write(l, pair.session().allocateTransferUid(), strategy.push()));
        }
        long waitStart = System.nanoTime();
        String outcome = strategy.await(pair.engine(), statuses, options.timeout);
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
        if (firstFailure != null) {
            out.println("request " + request + ": a status failed: " + firstFailure);
        }
        PrefillPair.Measurement m = pair.finish(request, waitStart, waitEnd);
        return new Figures(strategy, request, (waitEnd - waitStart) / 1e6, outcome, succeeded, statuses.size(),
                m.rawCopyMs(), m.layerCopyMs(), (waitStart - postStart) / 1e6, m.copyEndAfterWaitStartMs(), m.lagMs(),
                m.mismatchedBytes(), m.badLayers());
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
                + " detection lag %.3f ms; %d mismatched bytes%n", f.strategy().label(), f.request(), f.waitMs(),
                f.succeeded(), f.statuses(), f.outcome(), f.rawCopyMs(), f.layerCopyMs(), f.postMs(),
                f.copyEndAfterWaitStartMs(), f.lagMs(), f.mismatched());
        out.flush();
    }

    private void report(List<Figures> all) throws IOException {
        Map<ReproStrategy, List<Figures>> by = new LinkedHashMap<>();
        for (Figures f : all) {
            by.computeIfAbsent(f.strategy(), k -> new ArrayList<>()).add(f);
        }
        StringBuilder md = new StringBuilder();
        md.append("| strategy | waits timed | wait median (ms) | wait min / max (ms) | statuses succeeded"
                + " | raw copy median (ms) | raw copy min / max (ms) | layer copy median (ms) | posting median (ms)"
                + " | copy left at wait start, median (ms) | wait / raw copy (median) | detection lag"
                + " median (ms) | lag min / max (ms) | mismatched bytes |\n");
        md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (var e : by.entrySet()) {
            List<Figures> fs = e.getValue();
            double[] wait = fs.stream().mapToDouble(Figures::waitMs).toArray();
            double[] copy = fs.stream().mapToDouble(Figures::rawCopyMs).toArray();
            double[] lag = fs.stream().mapToDouble(Figures::lagMs).toArray();
            double[] layer = fs.stream().mapToDouble(Figures::layerCopyMs).toArray();
            double[] post = fs.stream().mapToDouble(Figures::postMs).toArray();
            double[] left = fs.stream().mapToDouble(Figures::copyEndAfterWaitStartMs).toArray();
            double[] ratio = fs.stream().mapToDouble(f -> f.waitMs() / f.rawCopyMs()).toArray();
            long ok = fs.stream().filter(f -> f.succeeded() == f.statuses()).count();
            long outcomesOk = fs.stream().filter(f -> f.outcome().equals("ok")).count();
            long mismatched = fs.stream().mapToLong(Figures::mismatched).sum();
            md.append(String.format(Locale.ROOT,
                    "| %s | %d | %.3f | %.3f / %.3f | %d of %d requests all %d (%d waits ok) | %.3f | %.3f / %.3f"
                            + " | %.4f | %.3f | %.3f | %.3f | %.3f | %.3f / %.3f | %d |\n",
                    e.getKey().label(), fs.size(), median(wait), min(wait), max(wait), ok, fs.size(),
                    fs.get(0).statuses(), outcomesOk, median(copy), min(copy), max(copy), median(layer),
                    median(post), median(left), median(ratio),
                    median(lag), min(lag), max(lag), mismatched));
        }
        out.println();
        out.println("copy path: " + options.copyPathDescription());
        out.print(md);
        out.flush();
        if (options.report != null) {
            Files.writeString(options.report, "<!-- " + Instant.now() + " -->\n" + md);
        }
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
                  --forward-bytes N: before each layer's fills, the compute stream also writes N bytes of a
                  scratch buffer, a stand-in for the layer's forward pass, so the GPU runs behind the posting
                  as in a real prefill (0: the GPU only fills the blocks and keeps up with the posting).
                  --copy-path: memcpy (default) posts one cudaMemcpyAsync per block; scatter-gather posts one
                  kernel per batch for batches of more than --scatter-gather-threshold blocks (default 0: all).""";
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
                        case "--transfer-timeout" -> o.timeout = duration(value);
                        case "--strategies" -> o.strategies = Arrays.stream(value.split(","))
                                .map(ReproStrategy::named).toList();
                        case "--layers" -> layers = Integer.parseInt(value);
                        case "--blocks" -> blocks = Integer.parseInt(value);
                        case "--block-bytes" -> blockBytes = Long.parseLong(value);
                        case "--report" -> o.report = Path.of(value);
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

        /** The prefill engine: MoRI's default pools, this run's copy path. */
        GpuCopyEngine.Config engineConfig() {
            return GpuCopyEngine.Config.DEFAULT.withScatterGatherThreshold(scatterGatherThreshold);
        }

        String copyPathDescription() {
            return scatterGatherThreshold == GpuCopyEngine.Config.SCATTER_GATHER_OFF
                    ? "memcpy (one cudaMemcpyAsync per merged segment)"
                    : "scatter-gather (one kernel per batch of more than " + scatterGatherThreshold + " blocks)";
        }

        /** {@code 30s}, {@code 500ms}, or a number of seconds. */
        static Duration duration(String value) {
            String v = value.trim().toLowerCase(Locale.ROOT);
            try {
                if (v.endsWith("ms")) {
                    return Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2)));
                }
                if (v.endsWith("s")) {
                    return Duration.ofMillis(Math.round(Double.parseDouble(v.substring(0, v.length() - 1)) * 1000));
                }
                return Duration.ofMillis(Math.round(Double.parseDouble(v) * 1000));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--transfer-timeout takes 30s, 500ms or seconds, got '" + value + "'");
            }
        }
    }
}
