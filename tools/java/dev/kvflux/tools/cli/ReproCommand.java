package dev.kvflux.tools.cli;

import static dev.kvflux.tools.cli.OptionChecks.require;

import dev.kvflux.operators.WaitSpec;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.GpuSettings;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproReport;
import dev.kvflux.tools.repro.ReproRun;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproStrategy;
import dev.kvflux.tools.repro.gpu.StreamProgressComparison;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

/**
 * {@code kvflux repro}: vLLM's MoRI-IO measurement, timing each wait strategy over 118 × 128 × 32 KiB
 * requests, on a simulator or on GPUs.
 */
@Command(name = "repro", mixinStandardHelpOptions = true,
        description = {"Reproduces vLLM's MoRI-IO measurement: writes 118 layers of 128 blocks x 32 KiB per request,"
                + " one batch per layer, and times how long each wait strategy takes to see the copies done.",
            "By default: native (the whole-timeout wait) for 2 requests, then reactive for 100."})
public final class ReproCommand implements Callable<Integer> {
    /** The most bytes either side's buffer may hold: far above the 944 MiB of the default geometry. */
    static final long MAX_REGION_BYTES = 64L << 30;

    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    ConfigOptions configOptions;

    @Option(names = "--wait", split = ",", paramLabel = "STRATEGY", completionCandidates = Strategies.class,
            description = "Strategies to time, in order, comma separated: ${COMPLETION-CANDIDATES}. native is"
                    + " the whole-timeout wait (one waitAll), sliced-native vLLM's fix (the native wait in slices),"
                    + " poll-1ms vLLM's MoRIIO wait today (one thread queries every status every 1 ms),"
                    + " reactive kvflux's polled wait (reactive-shared on the shared poll driver, reactive-adaptive"
                    + " polling densely near the copies' predicted end), reactive-push its push wait, and"
                    + " reactive-push-direct the same signalling on the push's own thread (default: native,reactive).")
    List<String> waits;

    @Option(names = "--requests", paramLabel = "N",
            description = "Waits to time per strategy (default: 2 for native, 100 for the others).")
    Integer requests;

    @Option(names = "--native-requests", paramLabel = "N",
            description = "Waits to time with native, whose every wait may last the whole timeout (default: as"
                    + " --requests, else 2).")
    Integer nativeRequests;

    @Option(names = "--warmup", paramLabel = "N",
            description = "Untimed requests per strategy before its timed ones, on the same path, so that the JIT"
                    + " has compiled it: its optimizing compiler takes a push wait's subscription after some 600"
                    + " requests, so give 1000 to time the steady state (default 0; native excepted, whose every wait"
                    + " may last the whole timeout).")
    Integer warmUp;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The transfer timeout, like 30s, 3s, 500ms or 30 (default: transfer.timeout, 30s).")
    Duration transferTimeout;

    @Option(names = "--slice", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The slice of the reactive and sliced-native waits (default: transfer.slice, 10ms).")
    Duration slice;

    @Option(names = "--backend", paramLabel = "NAME",
            description = "Where to run: sim-xgmi, native-sim, mori, cuda or hip (default: engine.backend).")
    String backend;

    @Option(names = "--layers", paramLabel = "N",
            description = "Layers per request, one batch each (default: 118, as in vLLM's MoRI-IO measurement).")
    Integer layers;

    @Option(names = "--blocks", paramLabel = "N", description = "Blocks per layer (default: 128).")
    Integer blocks;

    @Option(names = "--block-bytes", paramLabel = "BYTES", description = "Bytes per block (default: 32768).")
    Integer blockBytes;

    @Mixin
    ReproGpuOptions gpuOptions;

    @Mixin
    JsonOption output;

    @Override
    public Integer call() {
        CommandLine cmd = spec.commandLine();
        KvfluxConfig config = configOptions.load(cmd);
        Duration timeout = transferTimeout != null ? transferTimeout : config.transfer().timeout();
        Duration sliceLength = slice != null ? slice : config.transfer().slice();
        require(cmd, !timeout.isZero() && !timeout.isNegative(), "--transfer-timeout must be greater than zero");
        require(cmd, timeout.compareTo(WaitSpec.MAX_TRANSFER_TIMEOUT) <= 0, "--transfer-timeout must be at most"
                + " 24h, got " + Durations.format(timeout) + "; a stalled transfer would hold its wait that long");
        require(cmd, !sliceLength.isZero() && sliceLength.compareTo(timeout) < 0,
                "--slice must be greater than zero and shorter than the transfer timeout (" + Durations.format(timeout) + ")");
        require(cmd, requests == null || requests >= 1, "--requests must be at least 1, got " + requests);
        require(cmd, warmUp == null || warmUp >= 0 && warmUp <= 100_000, "--warmup must be 0 to 100000, got " + warmUp);
        require(cmd, nativeRequests == null || nativeRequests >= 1, "--native-requests must be at least 1, got "
                + nativeRequests);
        List<ReproRun.Plan> plans = plans(cmd);
        require(cmd, sliceLength.compareTo(Duration.ofMillis(1)) >= 0
                        || plans.stream().noneMatch(p -> p.strategy().equals("sliced-native")),
                "--slice must be at least 1ms for sliced-native, whose waitAll takes whole milliseconds; got "
                        + Durations.format(sliceLength));
        ReproGeometry geometry = geometry(cmd);
        String backendName = backend != null ? backend : config.engine().backend();
        GpuSettings gpu = gpuOptions.settings(cmd, backendName);
        ReproBackend target;
        try {
            target = ReproBackends.named(backendName, config);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--backend: " + e.getMessage());
        }
        PrintStream err = System.err;
        err.printf(Locale.ROOT, "kvflux repro on %s: %s, transfer timeout %s, slice %s%n", target.name(),
                describe(plans), Durations.format(timeout), Durations.format(sliceLength));
        List<ReproRun.Result> results = new ArrayList<>();
        List<Boolean> progressRuns = gpuOptions.streamProgressRuns(cmd);
        try {
            for (boolean shared : progressRuns) {
                if (progressRuns.size() > 1) {
                    err.println("stream progress " + (shared ? "on" : "off") + ":");
                }
                ReproSettings settings = new ReproSettings(timeout, sliceLength, config,
                        gpu.withSharedStreamProgress(shared));
                results.add(ReproRun.run(target, geometry, settings, plans, new StderrProgress(err, timeout)));
            }
        } catch (RuntimeException e) {
            err.println("kvflux repro: backend " + target.name() + " failed: " + e.getMessage());
            return 1;
        }
        print(results);
        long mismatched = results.stream().flatMap(r -> r.strategies().stream()).flatMap(s -> s.waits().stream())
                .mapToLong(ReproRun::mismatchedBytes).sum();
        if (mismatched > 0) {
            err.println("kvflux repro: decode found " + mismatched + " mismatched bytes");
            return 1;
        }
        return 0;
    }

    /** One table or JSON document per run; after two runs (on and off), the stream-progress comparison. */
    private void print(List<ReproRun.Result> results) {
        List<String> comparison = results.size() == 2
                ? StreamProgressComparison.lines(results.get(0), results.get(1)) : List.of();
        if (output.json()) {
            System.out.println(results.size() == 1 ? ReproReport.json(results.getFirst())
                    : ReproReport.json(results, comparison));
        } else {
            System.out.println(String.join(System.lineSeparator(), results.stream().map(ReproReport::table).toList()));
            comparison.forEach(System.out::println);
        }
    }

    /** One plan per {@code --wait} strategy, with its number of requests. */
    List<ReproRun.Plan> plans(CommandLine cmd) {
        List<ReproRun.Plan> plans = new ArrayList<>();
        for (String name : waits != null ? waits : List.of("native", "reactive")) {
            try {
                ReproStrategy strategy = ReproStrategy.named(name);
                Integer given = strategy == ReproStrategy.NATIVE && nativeRequests != null ? nativeRequests : requests;
                int untimed = strategy == ReproStrategy.NATIVE || warmUp == null ? 0 : warmUp;
                plans.add(new ReproRun.Plan(strategy.label(), given != null ? given : strategy.defaultRequests(),
                        untimed));
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(cmd, "--wait: " + e.getMessage());
            }
        }
        return plans;
    }

    /** {@code --layers} × {@code --blocks} × {@code --block-bytes}, vLLM's MoRI-IO measurement's by default. */
    ReproGeometry geometry(CommandLine cmd) {
        ReproGeometry d = ReproGeometry.VLLM_MORI_IO;
        int l = layers != null ? OptionChecks.inRange(cmd, "--layers", layers, 1, 4096) : d.layers();
        int b = blocks != null ? OptionChecks.inRange(cmd, "--blocks", blocks, 1, 65_536) : d.blocks();
        long bytes = blockBytes != null ? OptionChecks.inRange(cmd, "--block-bytes", blockBytes, 1, 1 << 30)
                : d.blockBytes();
        ReproGeometry g = new ReproGeometry(l, b, bytes);
        require(cmd, g.regionBytes() <= MAX_REGION_BYTES, String.format(Locale.ROOT, "--layers x --blocks x"
                + " --block-bytes: each side's buffer would hold %.1f GiB (layers x 2 x blocks x block bytes: every"
                + " other block stays free); at most %d GiB", g.regionBytes() / (double) (1L << 30),
                MAX_REGION_BYTES >> 30));
        return g;
    }

    private static String describe(List<ReproRun.Plan> plans) {
        return String.join(", then ", plans.stream().map(p -> p.strategy() + " for " + p.requests()
                + (p.requests() == 1 ? " request" : " requests")
                + (p.warmUp() > 0 ? " after " + p.warmUp() + " untimed" : "")).toList());
    }

    /** The names {@code --wait} takes, from {@link ReproStrategy}. */
    static final class Strategies implements Iterable<String> {
        @Override
        public java.util.Iterator<String> iterator() {
            return ReproStrategy.labels().iterator();
        }
    }

    /** A live line while a wait runs (so a 30 s wait never looks like a hang), and one line per wait. */
    private static final class StderrProgress implements ReproRun.Progress {
        private final PrintStream err;
        private final Duration timeout;
        private final boolean terminal = System.console() != null;

        StderrProgress(PrintStream err, Duration timeout) {
            this.err = err;
            this.timeout = timeout;
        }

        @Override
        public synchronized void waiting(String strategy, int request, int requests, Duration elapsed) {
            String line = String.format(Locale.ROOT, "  %s %d/%d: waiting %d s of the %s timeout ...", strategy,
                    request + 1, requests, elapsed.toSeconds(), Durations.format(timeout));
            if (terminal) {
                err.print("\r" + line);
            } else if (elapsed.toSeconds() % 5 == 0) {
                err.println(line);
            }
            err.flush();
        }

        @Override
        public synchronized void waited(String strategy, int request, int requests, ReproRun.Wait wait) {
            if (terminal) {
                err.print("\r\033[K");
            }
            err.printf(Locale.ROOT, "  %s %d/%d: wait %.3f s, %d/%d statuses succeeded, %s%n", strategy, request + 1,
                    requests, wait.seconds(), wait.succeeded(), wait.total(), wait.failed() ? wait.error() : "ok");
        }
    }
}
