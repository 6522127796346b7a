package dev.kvflux.tools.bench;

import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.tools.RoleJvm;
import dev.kvflux.tools.chaos.RoleProcess;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A whole cluster for one of {@code kvflux hostile}'s HTTP attacks: {@code kvflux proxy}, {@code kvflux prefill} and
 * one or more {@code kvflux decode} as child processes, in the roles' JVM ({@link RoleJvm}: the options of
 * {@code config/role-jvm.options} and {@code KVFLUX_JAVA_OPTS}), on free loopback ports below the ephemeral range (so
 * that the attacks' own connections never take one), all with the same notify secret in
 * {@value NotifyAuth#ENV}, so that registrations and the proxy's requests to the roles are signed as in a secured
 * deployment. Each role's output goes to a log file of its own, which is kept. Not thread-safe: the attack that
 * started it closes it.
 */
final class AttackStack implements AutoCloseable {
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(2)).build();
    /** Role processes started and not yet gone, killed if this JVM exits first. */
    private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly),
                "kvflux-attack-reaper"));
    }

    /**
     * One role process.
     *
     * @param name {@code proxy}, {@code prefill}, {@code decode} or {@code decode-b} and so on
     * @param httpPort its HTTP port (the proxy's: the clients' port)
     * @param notifyPort its notify port (the proxy's: its discovery port)
     */
    record Role(String name, Process process, Path log, int httpPort, int notifyPort) {
        /** Its HTTP address as it registers it, {@code host:port}. */
        String http() {
            return "127.0.0.1:" + httpPort;
        }

        /** Whether its log holds an {@code OutOfMemoryError}. */
        boolean oom() {
            try (var lines = Files.lines(log, StandardCharsets.ISO_8859_1)) {
                return lines.anyMatch(line -> line.contains("OutOfMemoryError"));
            } catch (IOException | java.io.UncheckedIOException e) {
                return false;
            }
        }
    }

    private final List<Role> roles;
    private final NotifyAuth secret;

    /** {@code roles} is filled as they start: a stack that fails to start is closed with the roles it has. */
    private AttackStack(List<Role> roles, NotifyAuth secret) {
        this.roles = roles;
        this.secret = secret;
    }

    /**
     * Starts a proxy, a prefill and {@code decodes} decodes with {@code launcher} (the java command of a role's JVM,
     * ending with the main class), logging to {@code logs/label-ROLE.log}, and returns once every role answers
     * {@code /health}, the proxy lists them all and a request through it has succeeded.
     *
     * @throws IllegalStateException if a role does not come up within two minutes
     */
    static AttackStack start(List<String> launcher, int decodes, Path logs, String label, PrintStream progress)
            throws IOException, InterruptedException {
        String secretText = "kvflux-hostile-" + java.util.UUID.randomUUID();
        int proxyPort = RoleProcess.freePorts(1);
        int discovery = RoleProcess.freePorts(1);
        List<List<String>> commands = new ArrayList<>();
        List<String> names = new ArrayList<>();
        List<int[]> ports = new ArrayList<>();
        commands.add(List.of("proxy", "--host", "127.0.0.1", "--port", Integer.toString(proxyPort),
                "--discovery-port", Integer.toString(discovery)));
        names.add("proxy");
        ports.add(new int[] {proxyPort, discovery});
        for (int i = 0; i <= decodes; i++) {
            String role = i == 0 ? "prefill" : "decode";
            int http = RoleProcess.freePorts(1);
            int notify = RoleProcess.freePorts(1);
            commands.add(List.of(role, "--host", "127.0.0.1", "--http-port", Integer.toString(http), "--notify-port",
                    Integer.toString(notify), "--proxy", "http://127.0.0.1:" + discovery));
            names.add(i <= 1 ? role : "decode-" + (char) ('a' + i - 1));
            ports.add(new int[] {http, notify});
        }
        List<Role> roles = new ArrayList<>();
        AttackStack stack = new AttackStack(roles, NotifyAuth.of(secretText));
        try {
            for (int i = 0; i < commands.size(); i++) {
                Path log = logs.resolve(label + "-" + names.get(i) + ".log");
                List<String> command = new ArrayList<>(launcher);
                command.addAll(commands.get(i));
                ProcessBuilder builder = RoleJvm.environment(new ProcessBuilder(command)).redirectErrorStream(true)
                        .redirectOutput(log.toFile());
                builder.environment().put(NotifyAuth.ENV, secretText);
                Process process = builder.start();
                RUNNING.add(process);
                process.onExit().thenRun(() -> RUNNING.remove(process));
                roles.add(new Role(names.get(i), process, log, ports.get(i)[0], ports.get(i)[1]));
            }
            for (Role role : roles) {
                awaitHealthy(role, Duration.ofSeconds(120));
            }
            stack.awaitRouting(decodes, Duration.ofSeconds(60));
            progress.printf("  stack up: proxy %d (discovery %d), %s; logs %s%n", proxyPort, discovery,
                    String.join(", ", roles.subList(1, roles.size()).stream().map(r -> r.name() + " " + r.httpPort())
                            .toList()), logs.resolve(label + "-*.log"));
            return stack;
        } catch (IOException | InterruptedException | RuntimeException e) {
            stack.close();
            throw e;
        }
    }

    /** The cluster's notify secret, as its roles have it. */
    NotifyAuth secret() {
        return secret;
    }

    /** Every role process: the proxy, prefill, then the decodes. */
    List<Role> roles() {
        return List.copyOf(roles);
    }

    Role proxy() {
        return roles.getFirst();
    }

    Role prefill() {
        return roles.get(1);
    }

    /** Decode {@code i}, from 0. */
    Role decode(int i) {
        return roles.get(2 + i);
    }

    /** {@code http://127.0.0.1:PORT}, the proxy's clients' port. */
    String proxyUrl() {
        return "http://127.0.0.1:" + proxy().httpPort();
    }

    /** {@code http://127.0.0.1:PORT}, the proxy's discovery port (registrations, {@code GET /health}). */
    String discoveryUrl() {
        return "http://127.0.0.1:" + proxy().notifyPort();
    }

    /** The proxy's discovery {@code GET /health} body, or null when it does not answer 200 within 2 s. */
    String proxyHealth() {
        try {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create(discoveryUrl() + "/health"))
                    .timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofString());
            return res.statusCode() == 200 ? res.body() : null;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /** {@code VmRSS} of {@code role}'s process in KiB, or -1 once it is gone. */
    static long rssKiB(Role role) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(role.process().pid()), "status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (IOException | RuntimeException gone) {
            // the process exited
        }
        return -1;
    }

    private static void awaitHealthy(Role role, Duration within) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        URI health = URI.create("http://127.0.0.1:" + role.httpPort() + "/health");
        while (System.nanoTime() - until < 0) {
            if (!role.process().isAlive()) {
                throw new IllegalStateException(role.name() + " exited with " + role.process().exitValue()
                        + " before it was healthy; see " + role.log());
            }
            try {
                if (HTTP.send(HttpRequest.newBuilder(health).timeout(Duration.ofSeconds(1)).build(),
                        HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
            } catch (IOException notYet) {
                // not listening yet
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException(role.name() + " was not healthy within " + within.toSeconds() + " s; see "
                + role.log());
    }

    /** Waits until the proxy lists prefill and every decode, and one small completion through it succeeds. */
    private void awaitRouting(int decodes, Duration within) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        String last = "no answer";
        while (System.nanoTime() - until < 0) {
            String health = proxyHealth();
            if (health != null && roles.subList(1, roles.size()).stream().allMatch(r -> health.contains(r.http()))) {
                try {
                    HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create(proxyUrl()
                            + "/v1/completions")).timeout(Duration.ofSeconds(30))
                            .header("content-type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"a b c d\", \"max_tokens\": 1}"))
                            .build(), HttpResponse.BodyHandlers.ofString());
                    if (res.statusCode() == 200) {
                        return;
                    }
                    last = res.statusCode() + " " + res.body();
                } catch (IOException e) {
                    last = e.toString();
                }
            } else {
                last = "the proxy lists " + health;
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException("the proxy did not route to prefill and " + decodes + " decode(s) within "
                + within.toSeconds() + " s (last: " + last + "); see the roles' logs");
    }

    /** Kills every role (SIGTERM, then SIGKILL after 10 s), the decodes first. */
    @Override
    public void close() throws InterruptedException {
        List<Role> started = List.copyOf(roles).reversed();
        for (Role role : started) {
            role.process().destroy();
        }
        for (Role role : started) {
            if (!role.process().waitFor(10, TimeUnit.SECONDS)) {
                role.process().destroyForcibly();
                role.process().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
