package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.scale.ScaleBench;
import dev.kvflux.tools.scale.ScaleReport;
import dev.kvflux.tools.scale.ScaleRow;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux bench}: the waits at scale, N concurrent requests x 118 statuses, for each wait strategy. */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measures the non-blocking waits at scale: N concurrent requests of 118 statuses, each"
                + " status finishing at a uniformly random time within 1 s, code() a cheap in-memory check, the"
                + " default scheduler. Prints CPU cores used, lag p50/p99/max, code() calls per status, GC,"
                + " errors and bytes allocated per status per tick.",
            "Takes about (warmup + rounds) x 1.1 s per strategy and N, plus 0.8 s per polling row."})
public final class BenchCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--n", split = ",", paramLabel = "N",
            description = "Concurrent requests, comma separated (default: 100,1000,10000).")
    List<Integer> ns;

    @Option(names = "--strategies", split = ",", paramLabel = "NAME",
            description = "Waits to measure, comma separated: poll-1ms (vLLM's MoRIIO wait: one thread queries"
                    + " every status every 1 ms), reactive, reactive-shared (the shared poll driver),"
                    + " reactive-adaptive (the bench's statuses do not tell their bytes: it polls every slice),"
                    + " reactive-push, and each with -drain (default: reactive,reactive-shared,reactive-push).")
    List<String> strategies;

    @Option(names = "--notifiers", paramLabel = "K",
            description = "Notifier threads that finish (and push) the statuses, each owning whole requests"
                    + " (default: one per 8 cores, at least 1).")
    Integer notifiers;

    @Option(names = "--notifier-tick", paramLabel = "DURATION",
            description = "Each notifier wakes at most once per this, finishing every status due by then, as a"
                    + " backend handing out completions on a timer does (default: 0, waking at each status's time;"
                    + " at most 10ms).")
    String notifierTick;

    @Option(names = "--statuses", paramLabel = "COUNT", description = "Statuses per request (default: 118).")
    Integer statuses;

    @Option(names = "--spread", paramLabel = "DURATION",
            description = "Statuses finish uniformly within this time (default: 1s).")
    String spread;

    @Option(names = "--slice", paramLabel = "DURATION", description = "The polling wait's slice (default: 10ms).")
    String slice;

    @Option(names = "--rounds", paramLabel = "COUNT", description = "Measured rounds per row (default: 3).")
    Integer rounds;

    @Option(names = "--warmup", paramLabel = "COUNT", description = "Unmeasured rounds first (default: 1).")
    Integer warmup;

    @Option(names = "--recorder", split = ",", paramLabel = "NAME",
            description = "What the waits report to: none, micrometer (a MicrometerWaitRecorder over a"
                    + " SimpleMeterRegistry), or both (none,micrometer: one row each, their rounds alternating,"
                    + " and the CPU cost of recording printed per round pair). Default: none.")
    List<String> recorders;

    @Mixin
    JsonOption output;

    @Override
    public Integer call() {
        ScaleBench.Settings defaults = ScaleBench.Settings.defaults();
        ScaleBench.Settings settings;
        try {
            Duration sliceLength = slice != null ? duration("--slice", slice) : defaults.slice();
            if (sliceLength.isZero() || sliceLength.compareTo(Duration.ofSeconds(1)) > 0) {
                throw new IllegalArgumentException("--slice must be greater than zero and at most 1s, got " + slice);
            }
            settings = new ScaleBench.Settings(ns != null ? ns : defaults.ns(),
                    strategies != null ? strategies.stream().map(String::trim).toList() : defaults.strategies(),
                    statuses != null ? statuses : defaults.statuses(),
                    spread != null ? duration("--spread", spread) : defaults.spread(),
                    rounds != null ? rounds : defaults.rounds(), warmup != null ? warmup : defaults.warmup(),
                    sliceLength, defaults.transferTimeout(), defaults.seed(),
                    recorders != null ? recorders.stream().map(String::trim).toList() : defaults.recorders(),
                    notifiers != null ? notifiers : defaults.notifiers(),
                    notifierTick != null ? duration("--notifier-tick", notifierTick) : defaults.notifierTick());
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        System.err.println("kvflux bench: " + settings.statuses() + " statuses per request within "
                + Durations.format(settings.spread()) + ", " + settings.warmup() + " warm-up and " + settings.rounds()
                + " measured rounds per row, " + settings.notifiers() + " notifier thread"
                + (settings.notifiers() == 1 ? "" : "s")
                + (settings.notifierTick().isZero() ? "" : " waking at most every "
                        + Durations.format(settings.notifierTick()))
                + "; " + ScaleReport.machine());
        List<ScaleRow> rows = ScaleBench.run(settings, line -> System.err.println("  " + line));
        System.out.println(output.json() ? ScaleReport.json(rows, settings) : ScaleReport.table(rows));
        return 0;
    }

    private static Duration duration(String option, String text) {
        try {
            return Durations.parse(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(option + ": " + e.getMessage());
        }
    }
}
