package dev.kvflux.tools.cli;

import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.tools.repro.ReproBackend;
import dev.kvflux.tools.repro.ReproBackends;
import dev.kvflux.tools.repro.ReproGeometry;
import dev.kvflux.tools.repro.ReproReport;
import dev.kvflux.tools.repro.ReproRun;
import dev.kvflux.tools.repro.ReproSettings;
import dev.kvflux.tools.repro.ReproStrategy;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux repro}: the seed's experiment, timing each wait strategy over 118 × 128 × 32 KiB requests. */
@Command(name = "repro", mixinStandardHelpOptions = true,
        description = {"Reproduces the seed's experiment: writes 118 layers of 128 blocks x 32 KiB per request,"
                + " one batch per layer, and times how long each wait strategy takes to see the copies done.",
            "By default: native for 2 requests, then reactive for 100."})
public final class ReproCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    ConfigOptions configOptions;

    @Option(names = "--wait", split = ",", paramLabel = "STRATEGY",
            description = "Strategies to time, in order, comma separated: native, sliced-native, reactive,"
                    + " reactive-push (default: native,reactive).")
    List<String> waits;

    @Option(names = "--requests", paramLabel = "N",
            description = "Waits to time per strategy (default: 2 for native, 100 for the others).")
    Integer requests;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The transfer timeout, like 30s, 3s, 500ms or 30 (default: transfer.timeout, 30s).")
    Duration transferTimeout;

    @Option(names = "--slice", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "The slice of the reactive and sliced-native waits (default: transfer.slice, 10ms).")
    Duration slice;

    @Option(names = "--backend", paramLabel = "NAME",
            description = "Where to run: sim-xgmi, native-sim, mori, cuda or hip (default: engine.backend).")
    String backend;

    @Mixin
    JsonOption output;

    @Option(names = "--processes", paramLabel = "N",
            description = "mori backend only: 1 (default), both MoRI engines in this process; 2, decode's engine"
                    + " and buffer in a child process on GPU 1, reached through real IPC handles.")
    Integer processes;

    @Option(names = "--gpu-platform", paramLabel = "PLATFORM",
            description = "mori backend only: the GPU runtime, cuda (NVIDIA) or hip (AMD); default: CUDA if"
                    + " installed, else HIP. The MoRI shim must be built for the same platform.")
    String gpuPlatform;

    @Override
    public Integer call() {
        CommandLine cmd = spec.commandLine();
        KvfluxConfig config = configOptions.load(cmd);
        Duration timeout = transferTimeout != null ? transferTimeout : config.transfer().timeout();
        Duration sliceLength = slice != null ? slice : config.transfer().slice();
        check(cmd, !timeout.isZero() && !timeout.isNegative(), "--transfer-timeout must be greater than zero");
        check(cmd, timeout.compareTo(WaitSpec.MAX_TRANSFER_TIMEOUT) <= 0, "--transfer-timeout must be at most 24h,"
                + " got " + Durations.format(timeout) + "; a stalled transfer would hold its wait that long");
        check(cmd, !sliceLength.isZero() && sliceLength.compareTo(timeout) < 0,
                "--slice must be greater than zero and shorter than the transfer timeout (" + Durations.format(timeout) + ")");
        check(cmd, requests == null || requests >= 1, "--requests must be at least 1, got " + requests);
        List<ReproRun.Plan> plans = new ArrayList<>();
        for (String name : waits != null ? waits : List.of("native", "reactive")) {
            try {
                ReproStrategy strategy = ReproStrategy.named(name);
                plans.add(new ReproRun.Plan(strategy.label(),
                        requests != null ? requests : strategy.defaultRequests()));
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(cmd, "--wait: " + e.getMessage());
            }
        }
        check(cmd, sliceLength.compareTo(Duration.ofMillis(1)) >= 0
                        || plans.stream().noneMatch(p -> p.strategy().equals("sliced-native")),
                "--slice must be at least 1ms for sliced-native, whose waitAll takes whole milliseconds; got "
                        + Durations.format(sliceLength));
        String backendName = backend != null ? backend : config.engine().backend();
        check(cmd, processes == null || backendName.equals("mori"), "--processes applies to --backend mori only");
        check(cmd, gpuPlatform == null || backendName.equals("mori"), "--gpu-platform applies to --backend mori only"
                + " (--backend cuda and hip name their platform)");
        check(cmd, processes == null || processes == 1 || processes == 2, "--processes must be 1 or 2, got " + processes);
        check(cmd, gpuPlatform == null || gpuPlatform.equals("cuda") || gpuPlatform.equals("hip"),
                "--gpu-platform must be cuda or hip, got '" + gpuPlatform + "'");
        // The mori backend reads both from system properties, which its decode process inherits.
        if (processes != null) {
            System.setProperty("kvflux.repro.processes", processes.toString());
        }
        if (gpuPlatform != null) {
            System.setProperty(GpuRuntime.RUNTIME_PROPERTY, gpuPlatform);
        }
        ReproBackend target;
        try {
            target = ReproBackends.named(backendName, config);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--backend: " + e.getMessage());
        }
        PrintStream err = System.err;
        err.printf(Locale.ROOT, "kvflux repro on %s: %s, transfer timeout %s, slice %s%n", target.name(),
                describe(plans), Durations.format(timeout), Durations.format(sliceLength));
        ReproRun.Result result;
        try {
            result = ReproRun.run(target, ReproGeometry.SEED, new ReproSettings(timeout, sliceLength, config), plans,
                    new StderrProgress(err, timeout));
        } catch (RuntimeException e) {
            err.println("kvflux repro: backend " + target.name() + " failed: " + e.getMessage());
            return 1;
        }
        System.out.println(output.json() ? ReproReport.json(result) : ReproReport.table(result));
        return 0;
    }

    private static void check(CommandLine cmd, boolean ok, String message) {
        if (!ok) {
            throw new CommandLine.ParameterException(cmd, message);
        }
    }

    private static String describe(List<ReproRun.Plan> plans) {
        return String.join(", then ", plans.stream().map(p -> p.strategy() + " for " + p.requests()
                + (p.requests() == 1 ? " request" : " requests")).toList());
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
