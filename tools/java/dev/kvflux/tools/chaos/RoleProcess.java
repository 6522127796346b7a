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
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * One serving role run as its own JVM ({@code kvflux prefill} or {@code kvflux decode}) with the same java
 * and classpath as this process and a role's JVM options ({@link RoleJvm}), on fixed loopback ports so that a
 * restart comes back at the same address. Its output is appended to a log file. Not thread-safe: one fault driver uses it at a time.
 */
final class RoleProcess implements AutoCloseable {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
    /** Every role process started and not yet gone, killed if this JVM exits first. */
    private static final java.util.Set<Process> RUNNING = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly),
                "kvflux-chaos-reaper"));
    }

    private final Role role;
    private final int httpPort;
    private final int notifyPort;
    private final List<String> extraArgs;
    private final Path log;
    private Process process;

    RoleProcess(Role role, int httpPort, int notifyPort, List<String> extraArgs, Path log) {
        this.role = Objects.requireNonNull(role, "role");
        this.httpPort = httpPort;
        this.notifyPort = notifyPort;
        this.extraArgs = List.copyOf(extraArgs);
        this.log = Objects.requireNonNull(log, "log");
    }

    /** The instance as the proxy knows it. */
    Instance instance() {
        return new Instance(role, InetSocketAddress.createUnresolved("127.0.0.1", httpPort),
                InetSocketAddress.createUnresolved("127.0.0.1", notifyPort));
    }

    /**
     * The command that runs {@code kvflux} in a role's JVM ({@link RoleJvm}), as {@code ./kvflux} runs a role, but
     * with C1 alone: chaos starts and restarts roles many times on small hosts, where C2's compilations took the
     * fault matrix past its time (over 60 s a group on 2 shared cores, 42 s with C1).
     */
    static List<String> kvfluxCommand() {
        return RoleJvm.command(System.getenv(), List.of("-XX:TieredStopAtLevel=1"), "dev.kvflux.tools.cli.KvfluxCli");
    }

    /** Starts the role's process; returns at once (see {@link #awaitHealthy}). */
    void start() throws IOException {
        List<String> command = new ArrayList<>(kvfluxCommand());
        command.addAll(List.of(role.wireName(), "--host", "127.0.0.1", "--http-port", Integer.toString(httpPort),
                "--notify-port", Integer.toString(notifyPort)));
        command.addAll(extraArgs);
        process = RoleJvm.environment(new ProcessBuilder(command)).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        Process started = process;
        RUNNING.add(started);
        started.onExit().thenRun(() -> RUNNING.remove(started));
    }

    /**
     * Waits until {@code GET /health} answers 200.
     *
     * @throws IllegalStateException if the process exits first or {@code within} passes
     */
    void awaitHealthy(Duration within) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        while (System.nanoTime() - until < 0) {
            if (!process.isAlive()) {
                throw new IllegalStateException(role.wireName() + " exited with " + process.exitValue()
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
        throw new IllegalStateException(role.wireName() + " was not healthy within " + within.toMillis() + " ms; see "
                + log);
    }

    /**
     * {@code GET /metrics}, read from its Prometheus text.
     *
     * @throws IOException if the role cannot be reached or its answer is not Prometheus text
     */
    PrometheusText metrics() throws IOException, InterruptedException {
        HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(url("/metrics")).timeout(Duration.ofSeconds(5))
                .build(), HttpResponse.BodyHandlers.ofString());
        try {
            return PrometheusText.parse(res.body());
        } catch (IllegalArgumentException e) {
            throw new IOException(role.wireName() + "'s /metrics answered " + res.statusCode() + " without Prometheus"
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
        return URI.create("http://127.0.0.1:" + httpPort + path);
    }

    @Override
    public void close() throws InterruptedException {
        kill();
    }
}
