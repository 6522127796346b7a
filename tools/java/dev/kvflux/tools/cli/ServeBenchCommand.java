package dev.kvflux.tools.cli;

import dev.kvflux.tools.bench.BenchReport;
import dev.kvflux.tools.bench.BenchRow;
import dev.kvflux.tools.bench.FaultPlan;
import dev.kvflux.tools.bench.ServeBench;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.proxy.FirstToken;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.ServingModel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;

/**
 * {@code kvflux serve-bench}: vLLM's serving benchmark of the MoRI-IO connector, before and after its sliced-wait
 * fix and under kvflux, reproduced on a simulated P/D pair over loopback.
 */
@Command(name = "serve-bench", mixinStandardHelpOptions = true,
        description = {"Starts a proxy, a prefill and a decode instance on loopback for each policy and concurrency,"
                + " and drives them with a closed-loop client shaped like vllm bench serve (16K-token prompts,"
                + " 16 output tokens). Prints completed / failed / never finished requests, completion waits"
                + " failed with IN_PROGRESS, request throughput and client TTFT; then, for roles in this process, each"
                + " handover stage's p50 and p99 (proxy in to the client's first byte, on one clock). Progress goes to"
                + " stderr.",
                "Nothing is time-scaled: the simulated model and xGMI engine run in real time."})
public final class ServeBenchCommand implements Callable<Integer> {
    private static final int MAX_CONCURRENCY = 10_000;
    private static final int MAX_PROMPTS = 10_000_000;

    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    ConfigOptions configOptions;

    @Mixin
    ModelOptions modelOptions;

    @Option(names = "--policy", split = ",", paramLabel = "NAME", converter = PolicyConverter.class,
            description = "Comma list of legacy (vLLM's connector with the whole-timeout wait), sliced (vLLM's"
                    + " sliced-wait fix), kvflux (default: all three).")
    List<Policy> policies = List.of(Policy.LEGACY, Policy.SLICED, Policy.KVFLUX);

    @Option(names = "--concurrency", split = ",", paramLabel = "N",
            description = "Comma list of client concurrencies (default 8,16).")
    List<Integer> concurrencies = List.of(8, 16);

    @Option(names = "--num-prompts", split = ",", paramLabel = "N",
            description = "Prompts per concurrency, one value or one per concurrency (default 96,192).")
    List<Integer> numPrompts = List.of(96, 192);

    @Option(names = {"--input-len", "--random-input-len"}, paramLabel = "TOKENS",
            description = "Prompt length (default ${DEFAULT-VALUE}).")
    int inputLen = 16_384;

    @Option(names = {"--output-len", "--random-output-len"}, paramLabel = "TOKENS",
            description = "Output tokens per request (default ${DEFAULT-VALUE}).")
    int outputLen = 16;

    @Option(names = "--first-token", paramLabel = "SOURCE",
            description = "Where a streamed answer's first token comes from: decode (default, as vLLM's proxy) or"
                    + " prefill (the proxy passes prefill's token on at once).")
    String firstToken = "decode";

    @Option(names = "--proxy-max-in-flight", paramLabel = "N",
            description = "The proxy's --max-in-flight: at most N requests past it at once, the others queued at the"
                    + " proxy (default 0: no limit).")
    int proxyMaxInFlight;

    @Option(names = "--transfer-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Prefill's completion-wait timeout (default: transfer.timeout, 30s).")
    Duration transferTimeout;

    @Option(names = "--receive-deadline", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "Decode's receive deadline under kvflux (default: the timeout plus half, at least 5s more).")
    Duration receiveDeadline;

    @Option(names = "--sg-under-load",
            description = "Scatter/gather copy path: copies are seen only after the prefill steps queued behind them.")
    boolean sgUnderLoad;

    @Option(names = "--inject-failures", paramLabel = "SPEC",
            description = "Fail one batch of this many requests per run: a count (3), a percentage (5%%) or a fraction (0.05).")
    String injectFailures;

    @Option(names = "--request-timeout", paramLabel = "DURATION", converter = DurationConverter.class,
            description = "A request still open this long after it was sent counts as never finished"
                    + " (default: 5 x the transfer timeout + 5s).")
    Duration requestTimeout;

    @Option(names = "--warmup", paramLabel = "N",
            description = "Requests sent to a kvflux stack first and not reported (default ${DEFAULT-VALUE}).")
    int warmup = 8;

    @Option(names = "--seed", paramLabel = "N", description = "The random-number seed that picks which requests fail (default ${DEFAULT-VALUE}).")
    long seed;

    @Mixin
    JsonOption output;

    @Option(names = "--backend", paramLabel = "NAME",
            description = "The roles' transfer engine: sim-xgmi (default: engine.backend), native-sim (the C simulator"
                    + " through FFM: every block's bytes copied and checked on decode, in host memory), cuda or hip"
                    + " (kvflux's GPU copy engine, the KV on --gpu; the roles run as processes), mori (the real MoRI IO's"
                    + " xGMI backend, KVFLUX_MORI_LIB naming libkvflux_mori.so; as processes).")
    String backend;

    @Option(names = "--kv-mode", split = ",", paramLabel = "MODE",
            description = "write (prefill writes into decode), read (decode reads from prefill) or write,read: both,"
                    + " side by side in one run (default: kv.mode).")
    List<String> kvModes;

    @Option(names = "--prefill-tp", split = ",", paramLabel = "N",
            description = "Prefill's tensor-parallel ranks, one value per run paired by position with --decode-tp"
                    + " (a single value applies to every pair), e.g. --prefill-tp 1,2 --decode-tp 1,4; powers of two"
                    + " up to 64 (default 1).")
    List<Integer> prefillTp;

    @Option(names = "--decode-tp", split = ",", paramLabel = "N",
            description = "Decode's tensor-parallel ranks, paired by position with --prefill-tp (default 1).")
    List<Integer> decodeTp;

    @Option(names = "--processes",
            description = "Run proxy, prefill and decode as processes of their own (always on cuda and hip).")
    boolean processes;

    @Option(names = "--kv-blocks", paramLabel = "N",
            description = "With --processes: KV blocks of each role (default ${DEFAULT-VALUE}: 16.3 GB per role for the"
                    + " default model).")
    int kvBlocks = 8192;

    @Option(names = "--gpu", paramLabel = "N", description = "cuda, hip and mori: the GPU both roles use (default 0).")
    int gpu;

    @Option(names = "--logs", paramLabel = "DIR",
            description = "With --processes: where the roles' logs go (default: a new temporary directory).")
    Path logs;

    @Option(names = "--report", paramLabel = "FILE.html",
            description = "Also write a self-contained HTML page with a TTFT distribution plot per policy.")
    Path report;

    @Override
    public Integer call() throws IOException {
        CommandLine cmd = spec.commandLine();
        checkOptions(cmd);
        OptionChecks.inRange(cmd, "--proxy-max-in-flight", proxyMaxInFlight, 0, 1_000_000);
        FirstToken source;
        try {
            source = FirstToken.named(firstToken);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--first-token: " + e.getMessage());
        }
        KvfluxConfig config = configOptions.load(cmd);
        Duration timeout = transferTimeout != null ? transferTimeout : config.transfer().timeout();
        FaultPlan faults;
        try {
            faults = injectFailures == null ? FaultPlan.NONE : FaultPlan.parse(injectFailures);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, e.getMessage());
        }
        ServingModel model = modelOptions.model(cmd);
        ServeBench.Settings settings;
        try {
            settings = new ServeBench.Settings(policies, concurrencies, numPrompts, inputLen, outputLen, timeout,
                    receiveDeadline, sgUnderLoad, faults, model,
                    requestTimeout != null ? requestTimeout : timeout.multipliedBy(5).plusSeconds(5), seed, warmup,
                    NotifySecret.resolve(config, cmd), new ServeBench.Roles(backend != null ? backend
                            : config.engine().backend(), processes, kvBlocks, gpu, logs),
                    kvModes == null ? List.of(config.engine().kvMode()) : kvModes.stream().map(KvMode::of).toList(),
                    tpPairs(prefillTp, decodeTp));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, e.getMessage());
        }
        Map<String, Object> described = describe(settings);
        System.err.println("serve-bench: " + described);
        described.put("first_token", source.wireName());
        described.put("proxy_max_in_flight", proxyMaxInFlight);
        List<BenchRow> rows = new ServeBench(settings, System.err).firstToken(source).proxyMaxInFlight(proxyMaxInFlight)
                .transfer(config.transfer()).run();
        System.out.print(output.json() ? BenchReport.json(rows, described) + System.lineSeparator()
                : BenchReport.table(rows));
        if (report != null) {
            Files.writeString(report, BenchReport.html(rows, described, timeout.toNanos() / 1e9));
            System.err.println("report written to " + report.toAbsolutePath());
        }
        return 0;
    }

    /** Every option's value, checked before anything starts, so a typo never costs a run. */
    private void checkOptions(CommandLine cmd) {
        OptionChecks.allInRange(cmd, "--concurrency", concurrencies, 1, MAX_CONCURRENCY);
        OptionChecks.allInRange(cmd, "--num-prompts", numPrompts, 1, MAX_PROMPTS);
        OptionChecks.inRange(cmd, "--input-len", inputLen, 1, CompletionSchema.MAX_PROMPT_TOKENS);
        OptionChecks.inRange(cmd, "--output-len", outputLen, 1, CompletionSchema.MAX_TOKENS);
        OptionChecks.inRange(cmd, "--warmup", warmup, 0, MAX_PROMPTS);
        OptionChecks.transferTimeout(cmd, "--transfer-timeout", transferTimeout);
        OptionChecks.positive(cmd, "--receive-deadline", receiveDeadline);
        OptionChecks.positive(cmd, "--request-timeout", requestTimeout);
        OptionChecks.writableFile(cmd, "--report", report);
    }

    /**
     * The TP pairs of {@code --prefill-tp} and {@code --decode-tp}, paired by position; one value of either goes with
     * every value of the other.
     *
     * @throws IllegalArgumentException if both have several values and their counts differ, or a size is not a power
     *     of two up to 64
     */
    static List<TpRanks> tpPairs(List<Integer> prefill, List<Integer> decode) {
        List<Integer> p = prefill == null || prefill.isEmpty() ? List.of(1) : prefill;
        List<Integer> d = decode == null || decode.isEmpty() ? List.of(1) : decode;
        if (p.size() != 1 && d.size() != 1 && p.size() != d.size()) {
            throw new IllegalArgumentException("--prefill-tp has " + p.size() + " values and --decode-tp " + d.size()
                    + "; give one value of either, or as many of each (they pair by position)");
        }
        int n = Math.max(p.size(), d.size());
        List<TpRanks> pairs = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int prefillSize = p.get(p.size() == 1 ? 0 : i);
            int decodeSize = d.get(d.size() == 1 ? 0 : i);
            try {
                pairs.add(new TpRanks(prefillSize, decodeSize));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("--prefill-tp " + prefillSize + " --decode-tp " + decodeSize + ": "
                        + e.getMessage());
            }
        }
        return List.copyOf(pairs);
    }

    private static Map<String, Object> describe(ServeBench.Settings s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", s.model().toString());
        m.put("input_len", s.inputTokens());
        m.put("output_len", s.outputTokens());
        m.put("transfer_timeout", Durations.format(s.transferTimeout()));
        m.put("kvflux_receive_deadline", Durations.format(s.kvfluxDeadline()));
        m.put("request_timeout", Durations.format(s.requestTimeout()));
        m.put("copy_path", s.sgUnderLoad() ? "scatter-gather under load" : "default");
        m.put("inject_failures", s.faults().spec());
        m.put("seed", s.seed());
        m.put("notify_auth", s.notifyAuth() == null ? "none" : "hmac-sha256");
        m.put("backend", s.backend());
        m.put("kv_modes", s.kvModes().stream().map(KvMode::wireName).toList());
        m.put("tp_pairs", s.tpPairs().stream().map(t -> t.prefillTp() + "/" + t.decodeTp()).toList());
        m.put("roles", s.processes() ? "processes, " + s.kvBlocks() + " KV blocks each" : "in this process");
        m.put("time_scale", "none: simulated model and engine run in real time");
        return m;
    }
}
