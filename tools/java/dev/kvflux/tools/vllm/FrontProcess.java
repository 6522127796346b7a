package dev.kvflux.tools.vllm;

import dev.kvflux.tools.RoleJvm;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A proxy in front of vLLM instances, as a process of its own, for {@code kvflux proxy-bench}: vLLM's toy proxy, or
 * kvflux's ({@code kvflux proxy --vllm-discovery}) in a role's JVM. Its clients' port, its ZeroMQ discovery endpoint,
 * and the CPU time and memory its process has used so far.
 */
final class FrontProcess implements AutoCloseable {
    private final String name;
    private final AutoCloseable owner;
    private final long pid;
    private final int port;
    private final String discovery;

    private FrontProcess(String name, AutoCloseable owner, long pid, int port, String discovery) {
        this.name = name;
        this.owner = owner;
        this.pid = pid;
        this.port = port;
        this.discovery = discovery;
    }

    /** vLLM's toy proxy, whose discovery port is fixed. */
    static FrontProcess toy(Path work) throws IOException, InterruptedException {
        ToyProxy toy = ToyProxy.start(work);
        return new FrontProcess("vllm-toy-proxy", toy, toy.pid(), toy.port(), "127.0.0.1:" + ToyProxy.DISCOVERY_PORT);
    }

    /** kvflux's proxy taking vLLM registrations, with the launcher's JVM options. */
    static FrontProcess kvflux(Path work) throws Exception {
        int port = freePort();
        int vllm = freePort();
        List<String> command = new ArrayList<>(RoleJvm.command(System.getenv(), List.of(),
                "dev.kvflux.tools.cli.KvfluxCli"));
        command.addAll(List.of("proxy", "--host", "127.0.0.1", "--port", Integer.toString(port), "--discovery-port",
                Integer.toString(freePort()), "--vllm-discovery", "127.0.0.1:" + vllm));
        Path log = work.resolve("kvflux-proxy-" + port + ".log");
        Process process = RoleJvm.environment(new ProcessBuilder(command)).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        AutoCloseable owner = () -> {
            process.destroy();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        };
        long until = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        while (!listening(port) || !listening(vllm)) {
            if (!process.isAlive() || System.nanoTime() > until) {
                owner.close();
                throw new IllegalStateException("kvflux proxy did not start: " + Files.readString(log));
            }
            Thread.sleep(100);
        }
        return new FrontProcess("kvflux-proxy", owner, process.pid(), port, "127.0.0.1:" + vllm);
    }

    private static int freePort() throws IOException {
        try (ServerSocket free = new ServerSocket(0)) {
            return free.getLocalPort();
        }
    }

    private static boolean listening(int port) {
        try (Socket s = new Socket("127.0.0.1", port)) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    String name() {
        return name;
    }

    int port() {
        return port;
    }

    String discovery() {
        return discovery;
    }

    /** CPU seconds the process has used so far (user and system), from {@code /proc}. */
    double cpuSeconds() {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / 100.0;
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
    }

    /** The process's resident memory now, in MiB, from {@code /proc}. */
    double rssMib() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
                }
            }
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
        return Double.NaN;
    }

    @Override
    public void close() throws Exception {
        owner.close();
    }
}
