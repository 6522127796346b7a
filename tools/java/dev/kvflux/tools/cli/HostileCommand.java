package dev.kvflux.tools.cli;

import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.tools.RoleJvm;
import dev.kvflux.tools.bench.HostileProbe;
import dev.kvflux.tools.bench.HttpAttacks;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code kvflux hostile}: what hostile notify traffic does to a real decode instance, and what attacks on the HTTP
 * front doors do to legitimate traffic through the proxy, in figures.
 */
@Command(name = "hostile", mixinStandardHelpOptions = true,
        description = {"Without --attack (or with --attack notify): starts `kvflux decode` as a child process on free"
                + " loopback ports and attacks its notify port: hostile frames of up to the frame limit (lying msgpack"
                + " headers, deep nesting, invalid UTF-8, huge valid notices, noise) from many connections, then a"
                + " flood of connection attempts. Prints decode's RSS growth, the acknowledgement latency of valid"
                + " notifications idle and under attack, /health latency during and after the flood, and how long"
                + " its file descriptors take to return to their baseline.",
                "With --attack NAME[,NAME...] (http: all of them): each attack starts a fresh proxy, prefill and"
                + " decode with one notify secret, runs legitimate traffic through the proxy (4 clients, small"
                + " prompts, half streamed) idle and then under the attack, and prints per attack: the legitimate"
                + " success rate and p50 against idle, what the attack's requests got, each role's RSS before, at"
                + " its peak and after, and whether a role died or logged OutOfMemoryError. The attacks: slowloris"
                + " (connections sending their heads at 1 byte/s to the proxy), slowloris-role (the same to decode,"
                + " then prefill), bodies (concurrent bodies just under 16 MiB to the proxy), bodies-signed (the same"
                + " to decode and prefill, signed with another secret), hog (one client's requests at the model"
                + " length), prefill-hog (one client's longest prompts), stall (a registered decode that answers 200"
                + " and then nothing), long-answer (a 4,000-token completion, not streamed), destination (a request"
                + " signed for one decode sent to another).",
                "Linux only. Progress goes to stderr."})
public final class HostileCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

    @Mixin
    JsonOption output;

    @Option(names = "--attack", paramLabel = "NAME", split = ",",
            description = "The attacks to run: notify (the default), http (every HTTP attack), or any of slowloris,"
                    + " slowloris-role, bodies, bodies-signed, hog, prefill-hog, stall, long-answer, destination.")
    List<String> attacks = new ArrayList<>();

    @Option(names = "--duration", paramLabel = "SECONDS",
            description = "HTTP attacks: how long each attack runs (default ${DEFAULT-VALUE}).")
    int duration = 30;

    @Option(names = "--slowloris-connections", paramLabel = "N",
            description = "HTTP attacks: connections each slowloris holds (default ${DEFAULT-VALUE}).")
    int slowlorisConnections = 4096;

    @Option(names = "--body-senders", paramLabel = "N",
            description = "HTTP attacks: concurrent senders of bodies just under 16 MiB (default ${DEFAULT-VALUE}).")
    int bodySenders = 64;

    @Option(names = "--hog-requests", paramLabel = "N",
            description = "HTTP attacks: the hog's concurrent requests at the model length (default ${DEFAULT-VALUE}).")
    int hogRequests = 256;

    @Option(names = "--prefill-hog-requests", paramLabel = "N",
            description = "HTTP attacks: the prefill hog's concurrent longest prompts (default ${DEFAULT-VALUE}).")
    int prefillHogRequests = 64;

    @Option(names = "--attacker-address", paramLabel = "ADDRESS",
            description = "HTTP attacks: the loopback address the attacks come from; the legitimate clients use"
                    + " 127.0.0.1 (default ${DEFAULT-VALUE}).")
    String attackerAddress = "127.0.0.2";

    @Option(names = "--logs", paramLabel = "DIR",
            description = "HTTP attacks: where the roles' logs go (default: a new temporary directory, kept).")
    Path logs;

    @Option(names = "--frames", paramLabel = "N", description = "Hostile frames to send (default ${DEFAULT-VALUE}).")
    int frames = 3_000;

    @Option(names = "--max-frame-bytes", paramLabel = "BYTES",
            description = "Largest hostile frame, 4096 bytes up to decode's 1 MiB limit (default ${DEFAULT-VALUE}).")
    int maxFrameBytes = 1 << 20;

    @Option(names = "--connections", paramLabel = "N",
            description = "Connections sending hostile frames at once (default ${DEFAULT-VALUE}).")
    int connections = 16;

    @Option(names = "--connect-attempts", paramLabel = "N",
            description = "Connection attempts in the flood (default ${DEFAULT-VALUE}).")
    int connectAttempts = 20_000;

    @Option(names = "--ack-samples", paramLabel = "N",
            description = "Valid notifications timed while idle (default ${DEFAULT-VALUE}).")
    int ackSamples = 2_000;

    @Option(names = "--decode-java-option", paramLabel = "OPTION",
            description = "A JVM option for the decode process, after the roles' defaults (config/role-jvm.options)"
                    + " and KVFLUX_JAVA_OPTS, so that it wins, e.g. -Xmx1g; repeatable (default: none).")
    List<String> decodeJavaOptions = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        if (!System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).contains("linux")) {
            throw new CommandLine.ParameterException(spec.commandLine(), "kvflux hostile reads decode's memory and"
                    + " file descriptors from /proc, so it runs on Linux only");
        }
        Set<String> names = new LinkedHashSet<>();
        for (String name : attacks) {
            if (name.strip().equals("http")) {
                Arrays.stream(HttpAttacks.Attack.values()).forEach(a -> names.add(a.wireName()));
            } else {
                names.add(name.strip());
            }
        }
        boolean notify = names.isEmpty() || names.remove("notify");
        List<HttpAttacks.Attack> http = new ArrayList<>();
        try {
            for (String name : names) {
                http.add(HttpAttacks.Attack.of(name));
            }
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage() + ", and notify");
        }
        if (http.isEmpty()) {
            return notifyProbe();
        }
        CommandLine cmd = spec.commandLine();
        OptionChecks.inRange(cmd, "--duration", duration, 1, 3600);
        OptionChecks.inRange(cmd, "--slowloris-connections", slowlorisConnections, 1, 1_000_000);
        OptionChecks.inRange(cmd, "--body-senders", bodySenders, 1, 10_000);
        OptionChecks.inRange(cmd, "--hog-requests", hogRequests, 1, 100_000);
        OptionChecks.inRange(cmd, "--prefill-hog-requests", prefillHogRequests, 1, 100_000);
        HttpAttacks.Settings settings;
        try {
            settings = new HttpAttacks.Settings(Duration.ofSeconds(duration), slowlorisConnections, bodySenders,
                    hogRequests, prefillHogRequests, attackerAddress, logs != null ? logs
                            : Files.createTempDirectory("kvflux-hostile-"));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        Map<String, Map<String, Object>> figures = new LinkedHashMap<>();
        if (notify) {
            figures.put("notify", notifyFigures());
        }
        System.err.printf("role logs: %s%n", settings.logs());
        figures.putAll(HttpAttacks.run(http, settings, launcher(List.of()), System.err));
        if (output.json()) {
            System.out.println(HttpJson.write(HttpJson.MAPPER.valueToTree(figures)));
        } else {
            HttpAttacks.table(figures).forEach(System.out::println);
        }
        return 0;
    }

    /** The notify-port probe alone, printed as a table (today's output) or, with {@code --json}, one document. */
    private int notifyProbe() throws Exception {
        Map<String, Object> figures = notifyFigures();
        if (output.json()) {
            System.out.println(HttpJson.write(HttpJson.MAPPER.valueToTree(figures)));
            return 0;
        }
        for (Map.Entry<String, Object> figure : figures.entrySet()) {
            Object value = figure.getValue();
            System.out.printf("%-46s %s%n", figure.getKey(),
                    value instanceof Double d ? String.format(java.util.Locale.ROOT, "%.2f", d) : value);
        }
        return 0;
    }

    /** The notify-port probe's figures. */
    private Map<String, Object> notifyFigures() throws Exception {
        HostileProbe.Settings settings;
        try {
            settings = new HostileProbe.Settings(frames, maxFrameBytes, connections, connectAttempts, ackSamples,
                    Duration.ofSeconds(60));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        return HostileProbe.run(settings, launcher(decodeJavaOptions), System.err).values();
    }

    /**
     * The java command that starts {@code kvflux decode} as the launcher does ({@link RoleJvm}: this JVM's java and
     * class path, the roles' defaults and {@code KVFLUX_JAVA_OPTS}), then {@code options}.
     */
    private static List<String> launcher(List<String> options) {
        return RoleJvm.command(System.getenv(), options, KvfluxCli.class.getName());
    }
}
