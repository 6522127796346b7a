package dev.kvflux.tools.cli;

import dev.kvflux.tools.RoleJvm;
import dev.kvflux.tools.bench.HostileProbe;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code kvflux hostile}: what hostile notify traffic does to a real decode instance, in figures. */
@Command(name = "hostile", mixinStandardHelpOptions = true,
        description = {"Starts `kvflux decode` as a child process on free loopback ports and attacks its notify port:"
                + " hostile frames of up to the frame limit (lying msgpack headers, deep nesting, invalid UTF-8,"
                + " huge valid notices, noise) from many connections, then a flood of connection attempts. Prints"
                + " decode's RSS growth, the acknowledgement latency of valid notifications idle and under attack,"
                + " /health latency during and after the flood, and how long its file descriptors take to return"
                + " to their baseline. Linux only. Progress goes to stderr."})
public final class HostileCommand implements Callable<Integer> {
    @Spec
    CommandLine.Model.CommandSpec spec;

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
        HostileProbe.Settings settings;
        try {
            settings = new HostileProbe.Settings(frames, maxFrameBytes, connections, connectAttempts, ackSamples,
                    Duration.ofSeconds(60));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        HostileProbe.Figures figures = HostileProbe.run(settings, launcher(decodeJavaOptions), System.err);
        for (Map.Entry<String, Object> figure : figures.values().entrySet()) {
            Object value = figure.getValue();
            System.out.printf("%-46s %s%n", figure.getKey(),
                    value instanceof Double d ? String.format(java.util.Locale.ROOT, "%.2f", d) : value);
        }
        return 0;
    }

    /**
     * The java command that starts {@code kvflux decode} as the launcher does ({@link RoleJvm}: this JVM's java and
     * class path, the roles' defaults and {@code KVFLUX_JAVA_OPTS}), then {@code options}.
     */
    private static List<String> launcher(List<String> options) {
        return RoleJvm.command(System.getenv(), options, KvfluxCli.class.getName());
    }
}
