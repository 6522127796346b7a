package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.proxy.InstanceHealth;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.IntFunction;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * What the proxy does with hostile or broken clients, measured on loopback against a real proxy, prefill and
 * decode in this process (a small simulated model, signed notifications and registrations):
 * <ol>
 *   <li>identical invalid completions: the answers by status, and how many reached prefill;</li>
 *   <li>a flood of unsigned registrations on the signed proxy's discovery port: answers by status, then
 *       whether clients are still served;</li>
 *   <li>a flood of registrations on an unsigned proxy with the default instance cap: answers by status and the
 *       instances it holds;</li>
 *   <li>with {@code directRequests}: requests straight to the roles (unsigned, forged, replayed, stale) while
 *       clients use the proxy; four prompts over the model length; a registration claiming the live decode's
 *       address; four decodes registered with the secret that never answer ({@link RoleAttacks});</li>
 *   <li>idle connections to the client port: the process's open files while they are held, how long
 *       {@code /health} takes meanwhile, and when the proxy closes them (at its idle timeout).</li>
 * </ol>
 * Each step prints one line as it ends and adds it to the report.
 */
public final class ProxyProbe {
    private static final ServingModel SMALL = new ServingModel("probe", 1_000_000, 4096, 4, Duration.ofMillis(2), 16, 64);
    private static final String VALID = "{\"prompt\": \"a b c\", \"max_tokens\": 2}";

    /**
     * What to run.
     *
     * @param invalidRequests copies of {@code {"prompt": 5}} sent at once (32 open)
     * @param registrations bogus registrations per flood
     * @param idleConnections idle connections opened to the client port
     * @param idleTimeout the proxy's idle timeout for this run (its default is 60 s)
     */
    public record Settings(int invalidRequests, int registrations, int idleConnections, Duration idleTimeout,
            int directRequests) {
        /** Without the attacks on the roles. */
        public Settings(int invalidRequests, int registrations, int idleConnections, Duration idleTimeout) {
            this(invalidRequests, registrations, idleConnections, idleTimeout, 0);
        }

        public Settings {
            Objects.requireNonNull(idleTimeout, "idleTimeout");
            if (invalidRequests < 1 || registrations < 1 || idleConnections < 1) {
                throw new IllegalArgumentException("counts must be at least 1, got " + invalidRequests + ", "
                        + registrations + ", " + idleConnections);
            }
            if (idleTimeout.isZero() || idleTimeout.isNegative()) {
                throw new IllegalArgumentException("the idle timeout must be greater than zero, got "
                        + DurationText.of(idleTimeout));
            }
        }
    }

    private final Settings settings;
    private final PrintStream progress;
    private final Map<String, Object> report = new java.util.LinkedHashMap<>();

    public ProxyProbe(Settings settings, PrintStream progress) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.progress = Objects.requireNonNull(progress, "progress");
    }

    /** Runs every step; the figures by step. */
    public Map<String, Object> run() throws IOException {
        NotifyAuth secret = NotifyAuth.of(HexFormat.of().formatHex(new SecureRandom().generateSeed(16)));
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        InstanceHealth health = InstanceHealth.defaults();
        HttpLimits limits = new HttpLimits(settings.idleTimeout(), HttpLimits.DEFAULT.readTimeout(),
                HttpLimits.DEFAULT.requestTimeout(), HttpLimits.DEFAULT.poolMaxIdleTime(),
                HttpLimits.DEFAULT.poolEvictEvery(), HttpLimits.DEFAULT.maxConnections());
        ConnectionProvider pool = ConnectionProvider.builder("kvflux-probe").maxConnections(64)
                // never reuse a connection the proxy may be closing at its idle timeout: a 2 MiB body written
                // onto it is reset
                .maxIdleTime(settings.idleTimeout().dividedBy(2)).build();
        HttpClient client = HttpClient.create(pool);
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(5))
                     .auth(secret).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .transferTimeout(Duration.ofSeconds(2)).notifyWithin(Duration.ofSeconds(5)).auth(secret).bindNow();
             ProxyServer proxy = ProxyServer.builder().discoveryPort(0).registry(registry).registrationSecret(secret)
                     .httpLimits(limits).healthChecks(Duration.ofSeconds(1), health).bindNow()) {
            String discovery = "http://127.0.0.1:" + proxy.discoveryAddress().getPort();
            String completions = "http://127.0.0.1:" + proxy.address().getPort() + "/v1/completions";
            decode.pingProxy(discovery, Duration.ofSeconds(1));
            prefill.pingProxy(discovery, Duration.ofSeconds(1));
            ServeBench.awaitRegistration(registry);

            long before = prefill.stats().requests();
            step("invalid_requests", Map.of("answers", statuses(client, completions, settings.invalidRequests(),
                    i -> "{\"prompt\": 5}"), "reached_prefill", prefill.stats().requests() - before));

            Map<String, Long> flood = statuses(client, discovery + "/register", settings.registrations(), ProxyProbe::bogus);
            step("unsigned_registrations_on_signed_proxy", Map.of("answers", flood,
                    "live_decode_instances", registry.live(Role.DECODE).size(),
                    "client_answers_after", statuses(client, completions, 50, i -> VALID)));

            InstanceRegistry open = new InstanceRegistry(Duration.ofSeconds(30));
            try (ProxyServer unsigned = ProxyServer.builder().discoveryPort(0).registry(open).bindNow()) {
                String url = "http://127.0.0.1:" + unsigned.discoveryAddress().getPort() + "/register";
                step("registrations_on_unsigned_proxy", Map.of("answers", statuses(client, url, settings.registrations(),
                        ProxyProbe::bogus), "live_decode_instances", open.live(Role.DECODE).size(),
                        "cap", open.maxPerRole()));
            }

            if (settings.directRequests() > 0) {
                RoleAttacks attacks = new RoleAttacks(client, completions, secret);
                step("direct_requests_to_roles", attacks.directRequests(prefill, decode, settings.directRequests(), 50));
                step("huge_prompts", attacks.hugePrompts(4, 1 << 20, 20));
                step("hijack_registration", attacks.hijack(discovery, registry, decode));
                step("blackhole_decodes", attacks.blackholeDecodes(discovery, health, 4, 20));
            }
            idle(client, proxy.address().getPort());
        } finally {
            pool.dispose();
        }
        return report;
    }

    private void step(String name, Map<String, Object> figures) {
        Map<String, Object> ordered = new TreeMap<>(figures);
        report.put(name, ordered);
        progress.println(name + ": " + ordered);
    }

    private static String bogus(int i) {
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("role", "decode")
                .put("http", "10." + (i >> 16 & 255) + "." + (i >> 8 & 255) + "." + (i & 255) + ":" + (1000 + i % 50_000))
                .put("notify", "10." + (i >> 16 & 255) + "." + (i >> 8 & 255) + "." + (i & 255) + ":" + (60_000 + i % 5_000));
        return HttpJson.write(json);
    }

    /** {@code count} posts of {@code body(i)} to {@code url}, 32 open at once; the answers by status. */
    private static Map<String, Long> statuses(HttpClient client, String url, int count, IntFunction<String> body) {
        List<String> answers = Flux.range(0, count)
                .flatMap(i -> client.post().uri(url)
                        .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body.apply(i).getBytes(StandardCharsets.UTF_8))))
                        .responseSingle((res, content) -> content.then(Mono.just(String.valueOf(res.status().code()))))
                        .onErrorResume(e -> Mono.just(e.getClass().getSimpleName())), 32)
                .collectList()
                .block(Duration.ofMinutes(5));
        Map<String, Long> counts = new TreeMap<>();
        for (String answer : answers == null ? List.<String>of() : answers) {
            counts.merge(answer, 1L, Long::sum);
        }
        return counts;
    }

    private void idle(HttpClient client, int port) throws IOException {
        long fdsBefore = openFiles();
        List<SocketChannel> sockets = new ArrayList<>();
        try (Selector selector = Selector.open()) {
            for (int i = 0; i < settings.idleConnections(); i++) {
                SocketChannel socket = SocketChannel.open(new InetSocketAddress("127.0.0.1", port));
                socket.configureBlocking(false);
                socket.register(selector, SelectionKey.OP_READ);
                sockets.add(socket);
            }
            long opened = System.nanoTime();
            long fdsHeld = openFiles();
            long healthStart = System.nanoTime();
            client.get().uri("http://127.0.0.1:" + port + "/health").responseContent().aggregate().asString()
                    .block(Duration.ofSeconds(30));
            double healthMs = (System.nanoTime() - healthStart) / 1e6;
            int closed = 0;
            double firstClosed = -1;
            double lastClosed = -1;
            long until = opened + settings.idleTimeout().plusSeconds(15).toNanos();
            ByteBuffer scratch = ByteBuffer.allocate(256);
            while (closed < sockets.size() && until - System.nanoTime() > 0) {
                selector.select(200);
                for (SelectionKey key : selector.selectedKeys()) {
                    scratch.clear();
                    int read;
                    try {
                        read = ((SocketChannel) key.channel()).read(scratch);
                    } catch (IOException e) {
                        read = -1;
                    }
                    if (read < 0) {
                        key.cancel();
                        closed++;
                        lastClosed = (System.nanoTime() - opened) / 1e9;
                        firstClosed = firstClosed < 0 ? lastClosed : firstClosed;
                    }
                }
                selector.selectedKeys().clear();
            }
            for (SocketChannel socket : sockets) {
                socket.close();
            }
            step("idle_connections", Map.of("opened", sockets.size(), "closed_by_proxy", closed,
                    "first_closed_s", round(firstClosed), "last_closed_s", round(lastClosed),
                    "idle_timeout_s", settings.idleTimeout().toMillis() / 1e3, "health_ms_while_held", round(healthMs),
                    "open_files_before", fdsBefore, "open_files_while_held", fdsHeld,
                    "open_files_after", openFiles()));
        } finally {
            for (SocketChannel socket : sockets) {
                socket.close();
            }
        }
    }

    private static double round(double value) {
        return Math.round(value * 10) / 10.0;
    }

    /** This process's open file descriptors (on Unix), else -1. */
    private static long openFiles() {
        return ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.UnixOperatingSystemMXBean unix
                ? unix.getOpenFileDescriptorCount() : -1;
    }
}
