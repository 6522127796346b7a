package dev.kvflux.tools.chaos;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * A real single-member etcd (3.4+) on free loopback ports with its data in a folder of its own, for the chaos run and
 * the tests: started, killed ({@code kill -9}), paused, and started again on the same ports and data, as an operator's
 * etcd would be restarted. Its timing is tightened (50 ms heartbeats, 500 ms elections) so that it starts in well
 * under a second and takes leases of 1 s. The binary is {@code $KVFLUX_ETCD}, else {@code /usr/bin/etcd} (Debian's
 * {@code etcd-server}). Not thread-safe.
 */
public final class EtcdProcess implements AutoCloseable {
    /** The environment variable naming the etcd binary, when it is not {@code /usr/bin/etcd}. */
    public static final String ENV = "KVFLUX_ETCD";
    private static final Path DEFAULT_BINARY = Path.of("/usr/bin/etcd");
    private static final Duration READY_WITHIN = Duration.ofSeconds(30);
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(500)).build();

    private final Path binary;
    private final Path dir;
    private final int clientPort;
    private final int peerPort;
    /** The member's name, the address it listens on, how it is started on its host, and its cluster's members. */
    private final String name;
    private final String address;
    private final List<String> exec;
    private final String initialCluster;
    /** Raft's heartbeat and election timeout, in ms. */
    private final int heartbeatMs;
    private final int electionMs;
    private Process process;

    private EtcdProcess(Path binary, Path dir, int clientPort, int peerPort) {
        this(binary, dir, "kvflux", "127.0.0.1", List.of(), clientPort, peerPort,
                "kvflux=http://127.0.0.1:" + peerPort, 50, 500);
    }

    private EtcdProcess(Path binary, Path dir, String name, String address, List<String> exec, int clientPort,
            int peerPort, String initialCluster, int heartbeatMs, int electionMs) {
        this.binary = binary;
        this.dir = dir;
        this.name = name;
        this.address = address;
        this.exec = List.copyOf(exec);
        this.clientPort = clientPort;
        this.peerPort = peerPort;
        this.initialCluster = initialCluster;
        this.heartbeatMs = heartbeatMs;
        this.electionMs = electionMs;
    }

    /**
     * One member of a cluster of several, on a host of its own ({@link Netns}): named {@code name}, listening on
     * {@code address} at ports {@value #MEMBER_CLIENT_PORT} (clients) and {@value #MEMBER_PEER_PORT} (peers), started
     * with {@code exec} before its command; {@code initialCluster} names every member, as etcd's
     * {@code --initial-cluster} does ({@link #peerUrl}). Its raft timing is 100 ms heartbeats and 1 s elections, for
     * members on one loaded host. Not started: {@link #launch()} each member, then {@link #awaitServing()} each (a
     * member serves once a quorum has elected a leader).
     */
    static EtcdProcess member(Path dir, String name, String address, List<String> exec, String initialCluster) {
        return new EtcdProcess(binary(), Objects.requireNonNull(dir, "dir"), name, address, exec, MEMBER_CLIENT_PORT,
                MEMBER_PEER_PORT, initialCluster, 100, 1000);
    }

    /** A member's client port on its host. */
    static final int MEMBER_CLIENT_PORT = 2379;
    /** A member's peer port on its host. */
    static final int MEMBER_PEER_PORT = 2380;

    /** {@code NAME=http://ADDRESS:2380}: one member's entry in {@code --initial-cluster}. */
    static String peerUrl(String name, String address) {
        return name + "=http://" + address + ":" + MEMBER_PEER_PORT;
    }

    /**
     * The etcd binary to run.
     *
     * @throws IllegalStateException saying how to install it, if there is none
     */
    public static Path binary() {
        String named = System.getenv(ENV);
        Path binary = named != null && !named.isBlank() ? Path.of(named) : DEFAULT_BINARY;
        if (!Files.isExecutable(binary)) {
            throw new IllegalStateException("etcd is not installed at " + binary + ": install Debian's etcd-server"
                    + " (apt-get install -y etcd-server, which puts etcd 3.4 at /usr/bin/etcd) or set " + ENV
                    + " to an etcd 3.4+ binary");
        }
        return binary;
    }

    /**
     * Starts etcd with its data under {@code dir} and waits until it serves.
     *
     * @throws IllegalStateException if etcd is not installed ({@link #binary()}), exits, or does not serve in 30 s
     */
    public static EtcdProcess start(Path dir) throws IOException, InterruptedException {
        EtcdProcess etcd = new EtcdProcess(binary(), Objects.requireNonNull(dir, "dir"), freePort(), freePort());
        etcd.startAgain();
        return etcd;
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    /** Starts the process again on the same ports and data (after {@link #kill()}), and waits until it serves. */
    public void startAgain() throws IOException, InterruptedException {
        launch();
        awaitServing();
    }

    /** Starts the process (on the same ports and data after {@link #kill()}); returns at once. */
    void launch() throws IOException {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException("etcd is already running");
        }
        Files.createDirectories(dir);
        String client = "http://" + address + ":" + clientPort;
        String peer = "http://" + address + ":" + peerPort;
        List<String> command = new java.util.ArrayList<>(exec);
        command.addAll(List.of(binary.toString(), "--name", name, "--data-dir",
                dir.resolve("data").toString(), "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster",
                initialCluster, "--initial-cluster-token", "kvflux-chaos", "--heartbeat-interval",
                Integer.toString(heartbeatMs), "--election-timeout", Integer.toString(electionMs), "--log-outputs",
                "stderr"));
        process = new ProcessBuilder(command)
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("etcd.log")
                        .toFile())).start();
        RoleProcess.track(process);
    }

    /**
     * Waits until etcd answers {@code /health} with true (a leader is known).
     *
     * @throws IllegalStateException if it exits first or does not serve within 30 s
     */
    void awaitServing() throws InterruptedException {
        long until = System.nanoTime() + READY_WITHIN.toNanos();
        while (System.nanoTime() - until < 0) {
            if (!process.isAlive()) {
                throw new IllegalStateException("etcd exited with " + process.exitValue() + " before it served; see "
                        + dir.resolve("etcd.log"));
            }
            try {
                HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + address + ":"
                        + clientPort + "/health")).timeout(Duration.ofSeconds(1)).build(), HttpResponse.BodyHandlers.ofString());
                if (res.statusCode() == 200 && res.body().contains("true")) {
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            Thread.sleep(25);
        }
        throw new IllegalStateException("etcd did not serve within " + READY_WITHIN.toSeconds() + " s; see "
                + dir.resolve("etcd.log"));
    }

    /** {@code etcd://ADDRESS:PORT}, as {@code --discovery} takes it. */
    public String url() {
        return "etcd://" + address + ":" + clientPort;
    }

    /** The client endpoint. */
    public InetSocketAddress endpoint() {
        return InetSocketAddress.createUnresolved(address, clientPort);
    }

    /** SIGKILL, as {@code kill -9}; waits for the process to be gone. */
    public void kill() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** SIGSTOP ({@code kill -STOP}): etcd holds its connections and answers nothing until {@link #resume()}. */
    public void pause() throws IOException, InterruptedException {
        RoleProcess.signal(process, "STOP");
    }

    /** SIGCONT after {@link #pause()}. */
    public void resume() throws IOException, InterruptedException {
        RoleProcess.signal(process, "CONT");
    }

    /** Where etcd's log goes. */
    public Path log() {
        return dir.resolve("etcd.log");
    }

    @Override
    public void close() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                kill();
            }
        }
    }
}
