package dev.kvflux.tools.bench;

import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.transfer.notify.NotifyCodec;
import dev.kvflux.tools.RoleJvm;
import dev.kvflux.tools.Stats;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Measures what a hostile peer can do to a real decode instance: starts {@code kvflux decode} as a child
 * process on free loopback ports, then (1) sends valid notifications on one connection and times their
 * acknowledgements while idle, (2) sends hostile frames of up to the frame limit from many connections while
 * timing the same acknowledgements, watching decode's resident memory, (3) makes a flood of connection
 * attempts, holding what decode accepts, and times decode's {@code /health} under it, then (4) closes them and
 * times how long decode's file descriptors take to return to their baseline. Linux only ({@code /proc}).
 * Progress goes to the given stream; the figures are returned.
 */
public final class HostileProbe {
    /** What to send. */
    public record Settings(int hostileFrames, int maxFrameBytes, int connections, int connectAttempts,
            int ackSamples, Duration settleLimit) {
        public Settings {
            if (hostileFrames < 1 || connections < 1 || connectAttempts < 0 || ackSamples < 10) {
                throw new IllegalArgumentException("hostile frames and connections must be positive, connection"
                        + " attempts not negative, and at least 10 acknowledgement samples; got " + hostileFrames
                        + ", " + connections + ", " + connectAttempts + ", " + ackSamples);
            }
            if (maxFrameBytes < 4096 || maxFrameBytes > 1 << 20) {
                throw new IllegalArgumentException("the largest hostile frame must be 4 KiB to 1 MiB (decode's"
                        + " frame limit), got " + maxFrameBytes);
            }
        }
    }

    /** The measured figures, in a stable order, with their names. */
    public record Figures(Map<String, Object> values) {
    }

    private final Settings settings;
    private final PrintStream progress;
    private final Map<String, Object> figures = new LinkedHashMap<>();

    private HostileProbe(Settings settings, PrintStream progress) {
        this.settings = settings;
        this.progress = progress;
    }

    /** Runs the probe against a fresh decode started with {@code launcher} (the java command and class path). */
    public static Figures run(Settings settings, List<String> launcher, PrintStream progress)
            throws IOException, InterruptedException {
        return new HostileProbe(settings, progress).run(launcher);
    }

    private Figures run(List<String> launcher) throws IOException, InterruptedException {
        int httpPort = freePort();
        int notifyPort = freePort();
        Path log = Files.createTempFile("kvflux-hostile-decode", ".log");
        List<String> command = new ArrayList<>(launcher);
        command.addAll(List.of("decode", "--http-port", Integer.toString(httpPort), "--notify-port",
                Integer.toString(notifyPort), "--proxy", "http://127.0.0.1:" + freePort()));
        int classPath = command.indexOf("-cp");
        progress.printf("decode's java options: %s%n", String.join(" ", classPath > 0 ? command.subList(1, classPath)
                : command));
        Process decode = RoleJvm.environment(new ProcessBuilder(command)).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        try {
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
            URI health = URI.create("http://127.0.0.1:" + httpPort + "/health");
            awaitHealthy(http, health, decode);
            InetSocketAddress notify = new InetSocketAddress("127.0.0.1", notifyPort);
            long pid = decode.pid();
            // warm decode's notify path up so that the baseline is not JIT and class loading
            ackLatencies(notify, settings.ackSamples() / 2, new AtomicBoolean(true), "warm");
            System.gc();
            long rssBase = rssKiB(pid);
            int fdsBase = fds(pid);
            long logLinesBase = lines(log);
            figures.put("decode_rss_baseline_mib", rssBase / 1024.0);
            figures.put("decode_fds_baseline", fdsBase);

            progress.printf("idle: %d acknowledged notifications...%n", settings.ackSamples());
            double[] idle = percentiles(ackLatencies(notify, settings.ackSamples(), new AtomicBoolean(true), "idle"));
            figures.put("ack_p50_idle_ms", idle[0]);
            figures.put("ack_p99_idle_ms", idle[1]);

            progress.printf("hostile: %d frames of up to %d bytes from %d connections...%n", settings.hostileFrames(),
                    settings.maxFrameBytes(), settings.connections());
            hostilePhase(notify, pid, rssBase);
            figures.put("decode_log_lines_during_hostile_frames", lines(log) - logLinesBase);

            progress.printf("flood: %d connection attempts...%n", settings.connectAttempts());
            long floodLinesBase = lines(log);
            floodPhase(notify, http, health, pid, fdsBase);
            figures.put("decode_log_lines_during_flood", lines(log) - floodLinesBase);
            figures.put("decode_alive_at_end", decode.isAlive());
            // absolute figures after the stable ones: what one decode took at most, not only what the attack added
            figures.put("decode_rss_peak_mib", (double) figures.get("decode_rss_baseline_mib")
                    + (double) figures.get("decode_rss_peak_growth_mib"));
            figures.put("decode_rss_at_end_mib", rssKiB(pid) / 1024.0);
            figures.putAll(notifyFigures(metrics(http, httpPort)));
            return new Figures(figures);
        } finally {
            decode.destroy();
            if (!decode.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
                decode.destroyForcibly();
            }
            Files.deleteIfExists(log);
        }
    }

    private void hostilePhase(InetSocketAddress notify, long pid, long rssBase)
            throws InterruptedException, IOException {
        // framed once, so that sending hundreds of MB makes no garbage in this JVM: its collector would pause the
        // acknowledgement timer and count against decode
        List<byte[]> frames = HostileFrames.of(settings.maxFrameBytes()).stream().map(HostileProbe::framed).toList();
        AtomicInteger next = new AtomicInteger();
        AtomicLong bytesSent = new AtomicLong();
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger closed = new AtomicInteger();
        AtomicLong rssPeak = new AtomicLong(rssBase);
        AtomicBoolean attacking = new AtomicBoolean(true);
        ExecutorService pool = Executors.newFixedThreadPool(settings.connections() + 2);
        try {
            Future<List<Long>> latencies = pool.submit(() -> ackLatencies(notify, Integer.MAX_VALUE, attacking,
                    "attack"));
            pool.submit(() -> {
                while (attacking.get()) {
                    rssPeak.accumulateAndGet(rssKiB(pid), Math::max);
                    Thread.sleep(50);
                }
                return null;
            });
            long start = System.nanoTime();
            List<Future<?>> senders = new ArrayList<>();
            for (int c = 0; c < settings.connections(); c++) {
                senders.add(pool.submit(() -> {
                    Socket socket = null;
                    try {
                        for (int i = next.getAndIncrement(); i < settings.hostileFrames(); i = next.getAndIncrement()) {
                            if (socket == null) {
                                socket = connect(notify);
                            }
                            byte[] frame = frames.get(i % frames.size());
                            bytesSent.addAndGet(frame.length - 4);
                            if (exchange(socket, frame)) {
                                acked.incrementAndGet();
                            } else {
                                closed.incrementAndGet();
                                socket.close();
                                socket = null;
                            }
                        }
                    } finally {
                        if (socket != null) {
                            socket.close();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> sender : senders) {
                sender.get();
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            attacking.set(false);
            double[] attack = percentiles(latencies.get());
            Thread.sleep(200);
            long rssAfter = rssKiB(pid);
            figures.put("hostile_frames_sent", settings.hostileFrames());
            figures.put("hostile_mib_sent", bytesSent.get() / 1048576.0);
            figures.put("hostile_seconds", seconds);
            figures.put("hostile_frames_acknowledged", acked.get());
            figures.put("hostile_frames_closing_their_connection", closed.get());
            figures.put("ack_p50_under_attack_ms", attack[0]);
            figures.put("ack_p99_under_attack_ms", attack[1]);
            figures.put("ack_p99_ratio_attack_to_idle", attack[1] / (double) figures.get("ack_p99_idle_ms"));
            figures.put("decode_rss_peak_growth_mib", (rssPeak.get() - rssBase) / 1024.0);
            figures.put("decode_rss_growth_after_mib", (rssAfter - rssBase) / 1024.0);
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IllegalStateException("a probe connection failed: " + e.getCause(), e.getCause());
        } finally {
            attacking.set(false);
            pool.shutdownNow();
        }
    }

    private void floodPhase(InetSocketAddress notify, HttpClient http, URI health, long pid, int fdsBase)
            throws InterruptedException, IOException {
        List<SocketChannel> held = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger attempts = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicBoolean flooding = new AtomicBoolean(true);
        List<Double> healthDuring = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newFixedThreadPool(17);
        int fdsPeak = fdsBase;
        try {
            pool.submit(() -> {
                while (flooding.get()) {
                    healthDuring.add(healthMillis(http, health));
                    Thread.sleep(100);
                }
                return null;
            });
            List<Future<?>> floods = new ArrayList<>();
            for (int t = 0; t < 16; t++) {
                floods.add(pool.submit(() -> {
                    List<SocketChannel> mine = new ArrayList<>();
                    while (attempts.getAndIncrement() < settings.connectAttempts()) {
                        try {
                            SocketChannel channel = SocketChannel.open();
                            channel.socket().connect(notify, 2000);
                            channel.configureBlocking(false);
                            mine.add(channel);
                        } catch (IOException e) {
                            failed.incrementAndGet();
                        }
                        if (mine.size() >= 256) {
                            sweep(mine, held);
                        }
                    }
                    sweep(mine, held);
                    held.addAll(mine);
                    return null;
                }));
            }
            while (floods.stream().anyMatch(f -> !f.isDone())) {
                fdsPeak = Math.max(fdsPeak, fds(pid));
                Thread.sleep(50);
            }
            flooding.set(false);
            List<Double> after = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                after.add(healthMillis(http, health));
            }
            figures.put("connect_attempts", settings.connectAttempts());
            figures.put("connect_attempts_failed", failed.get());
            figures.put("probe_sockets_not_yet_seen_closed_after_flood", held.size());
            figures.put("decode_fds_peak", Math.max(fdsPeak, fds(pid)));
            figures.put("health_max_during_flood_ms", healthDuring.stream().mapToDouble(d -> d).max().orElse(-1));
            figures.put("health_max_after_flood_ms", after.stream().mapToDouble(d -> d).max().orElse(-1));
        } finally {
            flooding.set(false);
            pool.shutdownNow();
            for (SocketChannel channel : held) {
                channel.close();
            }
        }
        long closedAt = System.nanoTime();
        long limit = closedAt + settings.settleLimit().toNanos();
        int fds = fds(pid);
        while (fds > fdsBase + 2 && limit - System.nanoTime() > 0) {
            Thread.sleep(50);
            fds = fds(pid);
        }
        figures.put("decode_fds_after_close", fds);
        figures.put("fds_back_to_baseline_s", fds > fdsBase + 2 ? -1 : (System.nanoTime() - closedAt) / 1e9);
    }

    /** Closes the channels decode already closed (its connection cap), moving none of the open ones. */
    private static void sweep(List<SocketChannel> mine, List<SocketChannel> held) {
        ByteBuffer one = ByteBuffer.allocate(1);
        mine.removeIf(channel -> {
            try {
                one.clear();
                if (channel.read(one) < 0) {
                    channel.close();
                    return true;
                }
                return false;
            } catch (IOException e) {
                try {
                    channel.close();
                } catch (IOException ignored) {
                    // closing a broken channel
                }
                return true;
            }
        });
    }

    /**
     * Round trips of valid {@code write_done} notifications on one connection, one every 2 ms, until
     * {@code count} or until {@code running} turns false; in milliseconds.
     */
    private static List<Long> ackLatencies(InetSocketAddress notify, int count, AtomicBoolean running, String tag)
            throws IOException, InterruptedException {
        List<Long> nanos = new ArrayList<>();
        try (Socket socket = connect(notify)) {
            for (int i = 0; i < count && running.get(); i++) {
                byte[] frame = framed(NotifyCodec.encode(new NotifyMessage.WriteDone("probe-" + tag + "-" + i)));
                long start = System.nanoTime();
                if (!exchange(socket, frame)) {
                    throw new IOException("decode closed the probe's valid connection");
                }
                nanos.add(System.nanoTime() - start);
                Thread.sleep(2);
            }
        }
        return nanos;
    }

    private static Socket connect(InetSocketAddress to) throws IOException {
        Socket socket = new Socket();
        socket.connect(to, 5000);
        socket.setSoTimeout(30_000);
        socket.setTcpNoDelay(true);
        return socket;
    }

    /** {@code payload} behind its 4-byte length, as the notify channel frames it. */
    private static byte[] framed(byte[] payload) {
        return ByteBuffer.allocate(4 + payload.length).putInt(payload.length).put(payload).array();
    }

    /** Sends one {@link #framed} frame; true when decode acknowledged it, false when it closed the connection. */
    private static boolean exchange(Socket socket, byte[] frame) throws IOException {
        try {
            socket.getOutputStream().write(frame);
            DataInputStream in = new DataInputStream(socket.getInputStream());
            in.readNBytes(in.readInt());
            return true;
        } catch (EOFException | SocketException closedByDecode) {
            return false;
        }
    }

    /** The median and 99th percentile, by nearest rank, in milliseconds; -1 for both without samples. */
    private static double[] percentiles(List<Long> nanos) {
        if (nanos.isEmpty()) {
            return new double[] {-1, -1};
        }
        double[] sorted = nanos.stream().mapToDouble(n -> n / 1e6).sorted().toArray();
        return new double[] {Stats.nearestRank(sorted, 0.50), Stats.nearestRank(sorted, 0.99)};
    }

    private static double healthMillis(HttpClient http, URI health) {
        long start = System.nanoTime();
        try {
            HttpResponse<Void> response = http.send(HttpRequest.newBuilder(health).timeout(Duration.ofSeconds(5))
                    .build(), HttpResponse.BodyHandlers.discarding());
            return response.statusCode() == 200 ? (System.nanoTime() - start) / 1e6 : -response.statusCode();
        } catch (IOException e) {
            return 5000;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 5000;
        }
    }

    /**
     * Decode's notify meters, one figure each: {@code decode_notify_frames_rejected[reason=malformed]} and the
     * like, from its Prometheus text; {@code decode_metrics} with what went wrong if it cannot be read.
     */
    static Map<String, Object> notifyFigures(String metrics) {
        Map<String, Object> notify = new LinkedHashMap<>();
        try {
            for (PrometheusText.Sample sample : PrometheusText.parse(metrics).samples()) {
                if (!sample.name().startsWith("kvflux_notify_")) {
                    continue;
                }
                StringBuilder key = new StringBuilder("decode_").append(sample.name().substring("kvflux_".length())
                        .replaceAll("_total$", ""));
                String labels = sample.labels().entrySet().stream().filter(e -> !e.getKey().equals("role"))
                        .sorted(Map.Entry.comparingByKey()).map(e -> e.getKey() + "=" + e.getValue())
                        .collect(java.util.stream.Collectors.joining(","));
                if (!labels.isEmpty()) {
                    key.append('[').append(labels).append(']');
                }
                notify.put(key.toString(), Math.round(sample.value()));
            }
        } catch (IllegalArgumentException e) {
            notify.put("decode_metrics", metrics);
        }
        return notify;
    }

    private static String metrics(HttpClient http, int httpPort) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/metrics"))
                    .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString()).body();
        } catch (IOException e) {
            return "unavailable: " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    private static void awaitHealthy(HttpClient http, URI health, Process decode) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (deadline - System.nanoTime() > 0) {
            if (!decode.isAlive()) {
                throw new IllegalStateException("decode exited with " + decode.exitValue() + " before answering /health");
            }
            double millis = healthMillis(http, health);
            if (millis >= 0 && millis < 5000) {
                return;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("decode did not answer /health within 60 s");
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    private static long rssKiB(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IOException("no VmRSS in /proc/" + pid + "/status");
    }

    private static int fds(long pid) throws IOException {
        try (var list = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
            return (int) list.count();
        }
    }

    private static long lines(Path log) throws IOException {
        try (var all = Files.lines(log, java.nio.charset.StandardCharsets.ISO_8859_1)) {
            return all.count();
        }
    }
}
