package dev.kvflux.tools.cli;

import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.tools.vllm.ProxyBench;
import dev.kvflux.tools.vllm.ToyProxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux proxy-bench}: vLLM's toy proxy and kvflux's side by side, in front of the same vLLM doubles. */
@Command(name = "proxy-bench", mixinStandardHelpOptions = true,
        description = {"Runs vLLM's MoRIIO toy proxy (the pinned file in ../shared/third_party, on Debian's"
                + " python3-quart, -hypercorn, -aiohttp, -zmq and -msgpack) and kvflux's proxy (kvflux proxy"
                + " --vllm-discovery), each as a process of its own, in front of two prefill and two decode doubles"
                + " that register over ZeroMQ as vLLM's connector does, and prints, for each: requests a second, p50 and"
                + " p99 latency, failures, the proxy's CPU and RSS at each concurrency; then each fault at concurrency 16"
                + " on a fresh deployment (a decode killed, a prefill answering 500, a blackholed decode, a decode back"
                + " on another port, 10,000 malformed registration frames) with the requests that failed or never"
                + " finished and when service was back. Progress on stderr."})
public final class ProxyBenchCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    JsonOption jsonOption;

    @Option(names = "--concurrency", paramLabel = "N[,N...]", split = ",",
            description = "Closed-loop clients at each level (default ${DEFAULT-VALUE}).")
    List<Integer> concurrency = List.of(16, 64, 256, 512);

    @Option(names = "--level", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How long each level runs, after 1 s of warm-up (default 10s).")
    Duration level = Duration.ofSeconds(10);

    @Option(names = "--fault-run", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "How long each fault's run lasts; the fault strikes 5 s in, and service counts as back"
                    + " from 15 s after it (default 30s; at least 25s).")
    Duration faultRun = Duration.ofSeconds(30);

    @Option(names = "--no-faults", description = "Measure the levels only.")
    boolean noFaults;

    @Option(names = "--work", paramLabel = "DIR", description = "Where the proxies' logs go (default ${DEFAULT-VALUE}).")
    Path work = Path.of("target", "proxy-bench");

    @Override
    public Integer call() throws Exception {
        CommandLine cmd = spec.commandLine();
        OptionChecks.allInRange(cmd, "--concurrency", concurrency, 1, 4096);
        OptionChecks.positive(cmd, "--level", level);
        OptionChecks.require(cmd, faultRun.compareTo(Duration.ofSeconds(25)) >= 0,
                "--fault-run must be at least 25s: the fault strikes at 5 s, service counts from 15 s after it");
        String why = ToyProxy.unavailable();
        if (why != null) {
            throw new CommandLine.ParameterException(cmd, "vLLM's toy proxy cannot run here: " + why);
        }
        Files.createDirectories(work);
        Map<String, Object> figures = new ProxyBench(new ProxyBench.Settings(concurrency, level, faultRun, !noFaults,
                work.toAbsolutePath()), System.err).run();
        if (jsonOption.json()) {
            System.out.println(HttpJson.write(HttpJson.MAPPER.valueToTree(figures)));
        } else {
            ProxyBenchTable.print(figures, System.out);
        }
        return 0;
    }
}
