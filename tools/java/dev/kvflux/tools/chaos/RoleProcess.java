package dev.kvflux.tools.chaos;

import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.tools.RoleJvm;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * One serving role run as its own JVM ({@code kvflux prefill}, {@code kvflux decode}, or {@code kvflux proxy} for the
 * faults that kill a proxy) with the same java and classpath as this process and a role's JVM options
 * ({@link RoleJvm}), on fixed loopback ports so that a restart comes back at the same address. Its output is appended
 * to a log file. Not thread-safe: one fault driver uses it at a time.
 */
public final class RoleProcess implements AutoCloseable {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
    /** Every role process started and not yet gone, killed if this JVM exits first. */
    private static final java.util.Set<Process> RUNNING = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly),
                "kvflux-chaos-reaper"));
    }

    /** The role, or null for a proxy. */
    private final Role role;
    private final int httpPort;
    private final int notifyPort;
    private final List<String> args;
    private final Map<String, String> environment;
    private final Path log;
    /** The address the role listens on, and the command prefix that starts it on its host (none on loopback). */
    private final String address;
    private final List<String> exec;
    /** Whether its JVM compiles with C1 alone ({@link #kvfluxCommand}); off for a benchmark's roles. */
    private final boolean c1Only;
    private Process process;

    public RoleProcess(Role role, int httpPort, int notifyPort, List<String> extraArgs, Path log) {
        this(role, "127.0.0.1", List.of(), httpPort, notifyPort, extraArgs, log);
    }

    /**
     * A role listening on {@code address}, started with {@code exec} before its command: on a host of {@link Netns},
     * its address and {@link Netns#exec}.
     */
    public RoleProcess(Role role, String address, List<String> exec, int httpPort, int notifyPort,
            List<String> extraArgs, Path log) {
        this(Objects.requireNonNull(role, "role"), httpPort, notifyPort,
                roleArgs(role, address, httpPort, notifyPort, extraArgs, log), Map.of(), log, address, exec, true);
    }

    private RoleProcess(Role role, int httpPort, int notifyPort, List<String> args, Map<String, String> environment,
            Path log, String address, List<String> exec, boolean c1Only) {
        this.c1Only = c1Only;
        this.address = Objects.requireNonNull(address, "address");
        this.exec = List.copyOf(exec);
        this.role = role;
        this.httpPort = httpPort;
        this.notifyPort = notifyPort;
        this.args = List.copyOf(args);
        this.environment = Map.copyOf(environment);
        this.log = Objects.requireNonNull(log, "log");
    }

    /**
     * The role's options: where it listens, and its history log beside its log ({@code NAME.history.jsonl} for
     * {@code NAME.log}), which a restart appends to; then {@code extraArgs}.
     */
    private static List<String> roleArgs(Role role, String address, int httpPort, int notifyPort,
            List<String> extraArgs, Path log) {
        List<String> args = new ArrayList<>(List.of(role.wireName(), "--host", address, "--http-port",
                Integer.toString(httpPort), "--notify-port", Integer.toString(notifyPort), "--history-log",
                historyLog(log).toString()));
        args.addAll(extraArgs);
        return args;
    }

    /** The history log of the role whose log is {@code log}: beside it, {@code .log} replaced by the history's suffix. */
    static Path historyLog(Path log) {
        String name = log.getFileName().toString();
        String stem = name.endsWith(".log") ? name.substring(0, name.length() - 4) : name;
        return log.resolveSibling(stem + dev.kvflux.tools.chaos.history.History.SUFFIX);
    }

    /** This role process with {@code environment} added to its process's (e.g. the notify secret). */
    RoleProcess withEnvironment(Map<String, String> environment) {
        return new RoleProcess(role, httpPort, notifyPort, args, environment, log, address, exec, c1Only);
    }

    /**
     * This role process with its JVM's every compiler, as {@code ./kvflux} runs a role: for a benchmark, whose figures
     * must be those of the roles users run (C1 alone read KV back thirteen times slower).
     */
    public RoleProcess withFullCompiler() {
        return new RoleProcess(role, httpPort, notifyPort, args, environment, log, address, exec, false);
    }

    /**
     * {@code kvflux proxy} on {@code port}, its discovery port on {@code discoveryPort}, with {@code extraArgs} (its
     * membership, say).
     */
    public static RoleProcess proxy(int port, int discoveryPort, List<String> extraArgs, Path log) {
        return proxy("127.0.0.1", List.of(), port, discoveryPort, extraArgs, log);
    }

    /** {@link #proxy(int, int, List, Path)} listening on {@code address}, started with {@code exec} (a host's). */
    static RoleProcess proxy(String address, List<String> exec, int port, int discoveryPort, List<String> extraArgs,
            Path log) {
        List<String> args = new ArrayList<>(List.of("proxy", "--host", address, "--port", Integer.toString(port),
                "--discovery-port", Integer.toString(discoveryPort)));
        args.addAll(extraArgs);
        return new RoleProcess(null, port, discoveryPort, args, Map.of(), log, address, exec, true);
    }

    /** The instance as the proxy knows it. */
    Instance instance() {
        if (role == null) {
            throw new IllegalStateException("a proxy is no instance");
        }
        List<InetSocketAddress> ranks = new ArrayList<>();
        for (int r = 0; r < tp(); r++) {
            ranks.add(InetSocketAddress.createUnresolved(address, notifyPort + r));
        }
        return new Instance(role, InetSocketAddress.createUnresolved(address, httpPort), ranks.getFirst(), ranks);
    }

    /** The ranks the role runs: its last {@code --tp}, else 1. Rank R listens on the notify port + R. */
    int tp() {
        int tp = 1;
        for (int i = 0; i + 1 < args.size(); i++) {
            if (args.get(i).equals("--tp")) {
                tp = Integer.parseInt(args.get(i + 1));
            }
        }
        return tp;
    }

    /**
     * A port {@code p} such that {@code p .. p + count - 1} are all free now: the notify ports of a role of
     * {@code count} ranks. They are taken below Linux's ephemeral range (32768 up), so that no outgoing connection
     * takes one while its role is down for a restart.
     */
    public static int freePorts(int count) throws IOException {
        java.util.random.RandomGenerator random = java.util.concurrent.ThreadLocalRandom.current();
        for (int attempt = 0; ; attempt++) {
            int first = 20_000 + random.nextInt(12_000 - count);
            boolean free = true;
            for (int p = first; p < first + count && free; p++) {
                try (java.net.ServerSocket probe = new java.net.ServerSocket(p)) {
                    free = probe.getLocalPort() == p;
                } catch (IOException taken) {
                    free = false;
                }
            }
            if (free) {
                return first;
            }
            if (attempt == 1000) {
                throw new IOException("found no " + count + " free ports in a row between 20000 and 32000");
            }
        }
    }

    /** {@code http://ADDRESS:PORT}: where clients (a proxy) or the proxy (an instance) send requests. */
    public String baseUrl() {
        return "http://" + address + ":" + httpPort;
    }

    private String name() {
        return role == null ? "proxy" : role.wireName();
    }

    /** Kills {@code process} if this JVM exits first. */
    static void track(Process process) {
        RUNNING.add(process);
        process.onExit().thenRun(() -> RUNNING.remove(process));
    }

    /** Sends {@code signal} ({@code STOP}, {@code CONT}) to {@code process}, as {@code kill -STOP pid} does. */
    static void signal(Process process, String signal) throws IOException, InterruptedException {
        if (process == null || !process.isAlive()) {
            throw new IllegalStateException("no running process to send SIG" + signal + " to");
        }
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).redirectErrorStream(true)
                .start();
        if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
            throw new IllegalStateException("kill -" + signal + " " + process.pid() + " failed: "
                    + new String(kill.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim());
        }
    }

    /** SIGSTOP ({@code kill -STOP pid}): the role is frozen, its sockets open, until {@link #resume()}. */
    void pause() throws IOException, InterruptedException {
        signal(process, "STOP");
    }

    /** SIGCONT ({@code kill -CONT pid}) after {@link #pause()}. */
    void resume() throws IOException, InterruptedException {
        signal(process, "CONT");
    }

    /**
     * The command that runs {@code kvflux} in a role's JVM ({@link RoleJvm}), as {@code ./kvflux} runs a role, but
     * (unless {@link #withFullCompiler()}) with C1 alone: chaos starts and restarts roles many times on small hosts, where C2's compilations took the
     * fault matrix past its time (over 60 s a group on 2 shared cores, 42 s with C1).
     */
    static List<String> kvfluxCommand(boolean c1Only) {
        return RoleJvm.command(System.getenv(), c1Only ? List.of("-XX:TieredStopAtLevel=1") : List.of(),
                "dev.kvflux.tools.cli.KvfluxCli");
    }

    /** Starts the role's process; returns at once (see {@link #awaitHealthy}). */
    public void start() throws IOException {
        List<String> command = new ArrayList<>(exec);
        command.addAll(kvfluxCommand(c1Only));
        command.addAll(args);
        ProcessBuilder builder = RoleJvm.environment(new ProcessBuilder(command)).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        builder.environment().putAll(environment);
        process = builder.start();
        track(process);
    }

    /**
     * Waits until {@code GET /health} answers 200.
     *
     * @throws IllegalStateException if the process exits first or {@code within} passes
     */
    public void awaitHealthy(Duration within) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        while (System.nanoTime() - until < 0) {
            if (!process.isAlive()) {
                throw new IllegalStateException(name() + " exited with " + process.exitValue()
                        + " before it was healthy; see " + log);
            }
            try {
                HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(url("/health"))
                        .timeout(Duration.ofSeconds(1)).build(), HttpResponse.BodyHandlers.ofString());
                if (res.statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException(name() + " was not healthy within " + within.toMillis() + " ms; see "
                + log);
    }

    /** {@code GET /health}'s body, or null when it cannot be read within a second. */
    String health() throws InterruptedException {
        try {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(url("/health")).timeout(Duration.ofSeconds(1))
                    .build(), HttpResponse.BodyHandlers.ofString());
            return res.statusCode() == 200 ? res.body() : null;
        } catch (IOException e) {
            return null;
        }
    }

    /**
     * {@code GET /metrics}, read from its Prometheus text.
     *
     * @throws IOException if the role cannot be reached or its answer is not Prometheus text
     */
    public PrometheusText metrics() throws IOException, InterruptedException {
        HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(url("/metrics")).timeout(Duration.ofSeconds(5))
                .build(), HttpResponse.BodyHandlers.ofString());
        try {
            return PrometheusText.parse(res.body());
        } catch (IllegalArgumentException e) {
            throw new IOException(name() + "'s /metrics answered " + res.statusCode() + " without Prometheus"
                    + " text: " + e.getMessage(), e);
        }
    }

    /** SIGKILL, as {@code kill -9}: nothing of the role runs on. Waits for the process to be gone. */
    void kill() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /**
     * SIGTERM: the role shuts down gracefully. Waits up to {@code within} for it to exit, then kills it.
     *
     * @return whether it exited by itself
     */
    boolean terminate(Duration within) throws InterruptedException {
        if (process == null || !process.isAlive()) {
            return true;
        }
        process.destroy();
        if (process.waitFor(within.toMillis(), TimeUnit.MILLISECONDS)) {
            return true;
        }
        kill();
        return false;
    }

    private URI url(String path) {
        return URI.create(baseUrl() + path);
    }

    @Override
    public void close() throws InterruptedException {
        kill();
    }
}
