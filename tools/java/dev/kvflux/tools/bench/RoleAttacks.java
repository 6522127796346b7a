package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.proxy.InstanceHealth;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.tools.Stats;
import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.transfer.notify.NotifyEvent;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;

/**
 * What a stranger can do to the cluster past the proxy, measured: requests sent straight to the roles (unsigned,
 * forged, replayed, stale) while clients use the proxy; prompts over the model length; decodes registered with the
 * secret that take connections and never answer; a registration that claims a live decode's address.
 */
final class RoleAttacks {
    private static final String VALID = "{\"prompt\": \"a b c\", \"max_tokens\": 2}";

    private final HttpClient client;
    private final String completions;
    private final NotifyAuth secret;

    RoleAttacks(HttpClient client, String completions, NotifyAuth secret) {
        this.client = client;
        this.completions = completions;
        this.secret = secret;
    }

    /**
     * {@code count} requests straight to prefill and decode, a quarter each unsigned, signed with another secret,
     * replays of one request the proxy would have signed, and signed a minute ago: alone, with the blocks and write
     * places the roles hold meanwhile and the notify connections and messages they send; then {@code count} more
     * while the proxy's clients send {@code latencySamples} requests one after another, whose median latency is
     * compared with idle.
     */
    Map<String, Object> directRequests(PrefillServer prefill, DecodeServer decode, int count, int latencySamples) {
        latencies(latencySamples); // warm-up: the first requests of a JVM are slow
        List<Double> idle = latencies(latencySamples);
        RequestAuth forger = RequestAuth.of(NotifyAuth.of("a-secret-that-is-not-the-cluster-s-0123"));
        RequestAuth stale = RequestAuth.of(secret.clock(pastClock(Duration.ofMinutes(1))));
        // one request as the proxy would sign it, sent once for real, then replayed
        String once = body("replayed", decode.notifyAddress());
        HttpHeaders original = RequestAuth.of(secret).sign(new DefaultHttpHeaders(), "POST", "/v1/completions",
                "replayed", destination(prefill.httpAddress()), "", bytes(once));
        String first = post(prefill.httpAddress(), once, original);
        // alone first, so that every connection, block and place counted is the attack's
        // (the one signed request above may still hold its blocks and place: counted from what is held now)
        long outboundBefore = outbound(prefill, decode);
        long blocksBefore = prefill.blocks().owners() + decode.blocks().owners();
        int placesBefore = prefill.writesInFlight();
        AtomicInteger maxBlocks = new AtomicInteger();
        AtomicInteger maxPlaces = new AtomicInteger();
        Disposable sampling = Flux.interval(Duration.ofMillis(10), Schedulers.parallel()).subscribe(tick -> {
            maxBlocks.accumulateAndGet((int) (prefill.blocks().owners() + decode.blocks().owners() - blocksBefore),
                    Math::max);
            maxPlaces.accumulateAndGet(prefill.writesInFlight() - placesBefore, Math::max);
        });
        Map<String, Long> answers;
        long outbound;
        try {
            answers = answers(count, i -> attack(i, prefill, decode, forger, stale, once, original));
            outbound = outbound(prefill, decode) - outboundBefore;
        } finally {
            sampling.dispose();
        }
        // then again while clients use the proxy, for their latency under it
        var clients = java.util.concurrent.CompletableFuture.supplyAsync(() -> latencies(latencySamples),
                java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor());
        Map<String, Long> again = answers(count, i -> attack(i, prefill, decode, forger, stale, once, original));
        List<Double> during = clients.join();
        again.forEach((status, n) -> answers.merge(status, n, Long::sum));
        Map<String, Object> figures = new TreeMap<>();
        figures.put("requests", 2 * count);
        figures.put("answers", answers);
        figures.put("first_signed_request", first.substring(0, 3));
        figures.put("outbound_connections_and_messages_during", outbound);
        figures.put("max_blocks_held_during", maxBlocks.get());
        figures.put("max_write_places_during", maxPlaces.get());
        figures.put("proxied_p50_ms_idle", round(median(idle)));
        figures.put("proxied_p50_ms_during", round(median(during)));
        figures.put("proxied_p50_ratio", round(median(during) / median(idle)));
        return figures;
    }

    /** A role's address as the proxy names it in a signature. */
    private static String destination(InetSocketAddress role) {
        return dev.kvflux.serving.api.Instance.hostPort(role);
    }

    /** Direct request {@code i}: unsigned, forged, stale, or the replay of one the proxy signed, in turn. */
    private Mono<String> attack(int i, PrefillServer prefill, DecodeServer decode, RequestAuth forger,
            RequestAuth stale, String once, HttpHeaders original) {
        if (i % 4 == 3) {
            return send(prefill.httpAddress(), once, original);
        }
        InetSocketAddress to = i % 2 == 0 ? prefill.httpAddress() : decode.httpAddress();
        String id = "direct-" + i;
        String body = body(id, new InetSocketAddress("127.0.0.1", 9));
        HttpHeaders headers = switch (i % 4) {
            case 0 -> new DefaultHttpHeaders();
            case 1 -> forger.sign(new DefaultHttpHeaders(), "POST", "/v1/completions", id, destination(to), "",
                    bytes(body));
            default -> stale.sign(new DefaultHttpHeaders(), "POST", "/v1/completions", id, destination(to), "",
                    bytes(body));
        };
        return send(to, body, headers);
    }

    /** {@code count} prompts of {@code words} words through the proxy, then {@code after} ordinary ones. */
    Map<String, Object> hugePrompts(int count, int words, int after) {
        String huge = "{\"prompt\": \"" + "w ".repeat(words).trim() + "\", \"max_tokens\": 16}";
        // each on a connection of its own: a pooled one the proxy is closing as idle would reset the 2 MiB body
        // written onto it, and the figure is the proxy's answer, not that race
        HttpClient fresh = HttpClient.newConnection();
        Map<String, Long> answers = answers(count, i -> send(fresh, completions, huge, new DefaultHttpHeaders()));
        Map<String, Long> legit = answers(after, i -> send(completions, VALID, new DefaultHttpHeaders()));
        return new TreeMap<>(Map.of("huge_prompts", count, "words_each", words, "answers", answers,
                "legitimate_answers_after", legit));
    }

    /**
     * {@code count} decodes registered with the secret that take connections and never answer; how long until the
     * proxy has ejected them all, and then {@code requests} ordinary requests: their answers and latency against idle.
     */
    Map<String, Object> blackholeDecodes(String discovery, InstanceHealth health, int count, int requests)
            throws IOException {
        List<Double> idle = latencies(20);
        List<AutoCloseable> holes = new ArrayList<>();
        try {
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                Blackhole hole = Blackhole.open(500);
                holes.add(hole);
                int port = hole.address().getPort();
                String registration = HttpJson.write(HttpJson.MAPPER.createObjectNode().put("role", "decode")
                        .put("http", "127.0.0.1:" + port)
                        .put("notify", "127.0.0.1:" + (port == 65535 ? 1 : port + 1)));
                post(discovery + "/register", registration, RegistrationAuth.of(secret).sign(new DefaultHttpHeaders(),
                        bytes(registration)));
            }
            long until = start + Duration.ofSeconds(30).toNanos();
            while (health.ejected() < count && System.nanoTime() - until < 0) {
                sleep(20);
            }
            double ejectedAfter = (System.nanoTime() - start) / 1e9;
            // one after another, as the idle figure was taken
            List<Double> during = new ArrayList<>();
            Map<String, Long> answers = new TreeMap<>();
            for (int i = 0; i < requests; i++) {
                long t0 = System.nanoTime();
                String answer = post(completions, VALID, new DefaultHttpHeaders());
                during.add((System.nanoTime() - t0) / 1e6);
                answers.merge(answer.length() >= 3 ? answer.substring(0, 3) : answer, 1L, Long::sum);
            }
            return new TreeMap<>(Map.of("blackholes", count, "ejected", health.ejected(), "all_ejected_after_s",
                    round(ejectedAfter), "answers", answers, "p50_ms_idle", round(median(idle)),
                    "p50_ms_after_ejection", round(median(during))));
        } finally {
            for (AutoCloseable hole : holes) {
                try {
                    hole.close();
                } catch (Exception ignored) {
                    // best effort: the probe ends anyway
                }
            }
        }
    }

    /** A signed registration that claims the live decode's HTTP address with another notify address. */
    Map<String, Object> hijack(String discovery, InstanceRegistry registry, DecodeServer decode) {
        String claim = HttpJson.write(HttpJson.MAPPER.createObjectNode().put("role", "decode")
                .put("http", "127.0.0.1:" + decode.httpAddress().getPort()).put("notify", "127.0.0.1:9"));
        String answer = post(discovery + "/register", claim, RegistrationAuth.of(secret).sign(new DefaultHttpHeaders(),
                bytes(claim)));
        boolean stillTheRealOne = registry.live(Role.DECODE).stream()
                .anyMatch(i -> i.notifyAddress().getPort() == decode.notifyAddress().getPort());
        return new TreeMap<>(Map.of("answer", answer.substring(0, 3), "refused_claims", registry.refusedClaims(),
                "real_decode_still_registered", stillTheRealOne));
    }

    /** Latencies of {@code n} ordinary requests through the proxy, one after another, in ms. */
    private List<Double> latencies(int n) {
        List<Double> ms = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            post(completions, VALID, new DefaultHttpHeaders());
            ms.add((System.nanoTime() - t0) / 1e6);
        }
        return ms;
    }

    private long outbound(PrefillServer prefill, DecodeServer decode) {
        return prefill.notifyMeters().count(NotifyEvent.CLIENT_CONNECTION_OPENED)
                + decode.notifyMeters().count(NotifyEvent.CLIENT_CONNECTION_OPENED)
                + prefill.notifyMeters().count(NotifyEvent.SENT) + decode.notifyMeters().count(NotifyEvent.SENT);
    }

    private static String body(String id, InetSocketAddress peer) {
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("prompt", "a b c").put("max_tokens", 2);
        json.putObject("kv_transfer_params").put("transfer_id", id).put("remote_notify", "127.0.0.1:" + peer.getPort());
        return HttpJson.write(json);
    }

    /** {@code count} requests that {@code send} makes, 32 at once; the answers by status (first three characters). */
    private static Map<String, Long> answers(int count, IntFunction<Mono<String>> send) {
        List<String> answers = Flux.range(0, count).flatMap(send::apply, 32).collectList().block(Duration.ofMinutes(10));
        Map<String, Long> counts = new TreeMap<>();
        for (String answer : answers == null ? List.<String>of() : answers) {
            counts.merge(answer.length() >= 3 ? answer.substring(0, 3) : answer, 1L, Long::sum);
        }
        return counts;
    }

    private String post(InetSocketAddress to, String body, HttpHeaders headers) {
        return send(to, body, headers).block(Duration.ofMinutes(2));
    }

    private String post(String url, String body, HttpHeaders headers) {
        return send(url, body, headers).block(Duration.ofMinutes(2));
    }

    private Mono<String> send(InetSocketAddress to, String body, HttpHeaders headers) {
        return send("http://127.0.0.1:" + to.getPort() + "/v1/completions", body, headers);
    }

    private Mono<String> send(String url, String body, HttpHeaders headers) {
        return send(client, url, body, headers);
    }

    /** The answer as {@code "<status> <body>"}, or the error's class name if there is none. */
    private static Mono<String> send(HttpClient client, String url, String body, HttpHeaders headers) {
        return client.headers(h -> h.add(headers)).post().uri(url)
                .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(bytes(body))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .onErrorResume(e -> Mono.just(e.getClass().getSimpleName()));
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** A clock {@code behind} the wall clock, for a signer whose signatures are stale on arrival. */
    private static Scheduler pastClock(Duration behind) {
        Scheduler now = Schedulers.immediate();
        return new Scheduler() {
            @Override
            public Disposable schedule(Runnable task) {
                return now.schedule(task);
            }

            @Override
            public Worker createWorker() {
                return now.createWorker();
            }

            @Override
            public long now(TimeUnit unit) {
                return unit.convert(System.currentTimeMillis() - behind.toMillis(), TimeUnit.MILLISECONDS);
            }
        };
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static double round(double value) {
        return Math.round(value * 100) / 100.0;
    }

    private static double median(List<Double> ms) {
        return Stats.median(ms.stream().mapToDouble(Double::doubleValue).toArray());
    }
}
