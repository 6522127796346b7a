package dev.kvflux.tools.vllm;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * vLLM's MoRIIO toy proxy, the pinned unmodified file from {@code ../shared/third_party/vllm-moriio-proxy}, run as a
 * process on Debian's Python packages (quart, hypercorn, aiohttp, zmq, msgpack) with a stand-in for the one vLLM
 * module it imports. Its discovery port is fixed in the file, {@value #DISCOVERY_PORT} on every address, so one runs
 * at a time.
 */
public final class ToyProxy implements AutoCloseable {
    public static final int DISCOVERY_PORT = 36367;
    private static final String PYTHON = "/usr/bin/python3";

    private final Process process;
    private final int port;
    private final Path log;

    private ToyProxy(Process process, int port, Path log) {
        this.process = process;
        this.port = port;
        this.log = log;
    }

    /** Where the pinned toy proxy is, or null when this checkout has no {@code ../shared} beside it. */
    public static Path source() {
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("../shared/third_party/vllm-moriio-proxy/moriio_toy_proxy_server.py")
                    .normalize();
            if (Files.isRegularFile(candidate)) {
                return candidate;
            }
        }
        return null;
    }

    /** Why the toy proxy cannot run here, or null when it can. */
    public static String unavailable() {
        if (source() == null) {
            return "the pinned toy proxy (../shared/third_party/vllm-moriio-proxy) is not beside this checkout";
        }
        try {
            Process check = new ProcessBuilder(PYTHON, "-c", "import quart, hypercorn, aiohttp, zmq, msgpack")
                    .redirectErrorStream(true).start();
            if (!check.waitFor(30, TimeUnit.SECONDS) || check.exitValue() != 0) {
                return PYTHON + " lacks Debian's python3-quart, python3-hypercorn, python3-aiohttp, python3-zmq or"
                        + " python3-msgpack (.ci/run installs them)";
            }
        } catch (IOException e) {
            return "no " + PYTHON + ": " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
        try (ServerSocket probe = new ServerSocket(DISCOVERY_PORT)) {
            return null;
        } catch (IOException e) {
            return "port " + DISCOVERY_PORT + ", the toy proxy's fixed discovery port, is in use";
        }
    }

    /** Starts the toy proxy on a free HTTP port and returns once it answers. */
    public static ToyProxy start(Path work) throws IOException, InterruptedException {
        Path stub = work.resolve("stub");
        Path module = stub.resolve("vllm/distributed/kv_transfer/kv_connector/v1/moriio");
        Files.createDirectories(module);
        for (Path dir = module; !dir.equals(stub); dir = dir.getParent()) {
            Files.writeString(dir.resolve("__init__.py"), "");
        }
        Files.writeString(module.resolve("moriio_common.py"), "class MoRIIOConstants:\n    TRANSFER_PREFIX = \"tx\"\n");
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        Path log = work.resolve("toy-proxy-" + port + ".log");
        // run as its own main, with Python's root logger at INFO: the file logs each registration at INFO, which
        // Python's default (WARNING and up) drops, and those lines are how a caller sees both roles are in
        ProcessBuilder builder = new ProcessBuilder(PYTHON, "-c", "import logging, runpy, sys;"
                + " logging.basicConfig(level=logging.INFO, format='%(asctime)s %(levelname)s %(message)s');"
                + " sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
                source().toString(), "--port", Integer.toString(port))
                .redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().put("PYTHONPATH", stub.toString());
        Process process = builder.start();
        ToyProxy toy = new ToyProxy(process, port, log);
        long until = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < until) {
            if (!process.isAlive()) {
                throw new IllegalStateException("the toy proxy exited: " + Files.readString(log));
            }
            if (listening(port) && listening(DISCOVERY_PORT)) {
                return toy;
            }
            Thread.sleep(100);
        }
        toy.close();
        throw new IllegalStateException("the toy proxy did not listen within 60 s: " + Files.readString(log));
    }

    private static boolean listening(int port) {
        try (Socket s = new Socket("127.0.0.1", port)) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    public int port() {
        return port;
    }

    /** The toy proxy's process id, for its CPU time and memory. */
    public long pid() {
        return process.pid();
    }

    public String log() throws IOException {
        return Files.readString(log);
    }

    /**
     * Whether the proxy has taken a prefill's and a decode's registration, as its log says: until then it answers
     * every request 503. It lists no instances over HTTP.
     */
    public boolean registered() {
        try {
            String text = log();
            return text.contains("Registered Prefill instance") && text.contains("Registered Decode instance");
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        // its discovery thread's port frees with the process
        long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (listening(DISCOVERY_PORT) && System.nanoTime() < until) {
            Thread.sleep(50);
        }
    }

    /** The Python packages the toy proxy needs, as .ci/run installs them. */
    public static List<String> debianPackages() {
        return List.of("python3-quart", "python3-hypercorn", "python3-aiohttp", "python3-zmq", "python3-msgpack");
    }
}
