package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.PrometheusText;
import io.netty.handler.codec.http.HttpHeaders;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Flux;
import reactor.netty.http.client.HttpClient;

/**
 * The attacks of {@link HttpAttacks}, each run against a stack that is up, with the legitimate load running; each
 * returns its own figures once it has stopped. {@link HttpAttacks} adds the load's and the roles' memory.
 */
final class AttackRuns {
    /** The body limit of the proxy and the roles. */
    static final int BODY_LIMIT = 16 * 1024 * 1024;
    private static final java.net.http.HttpClient HTTP = java.net.http.HttpClient.newBuilder()
            .version(java.net.http.HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(2)).build();

    private final HttpAttacks.Settings settings;
    private final PrintStream progress;

    AttackRuns(HttpAttacks.Settings settings, PrintStream progress) {
        this.settings = settings;
        this.progress = progress;
    }

    /** N1, N2: a slowloris of the configured connections against {@code target}'s HTTP port. */
    Map<String, Object> slowloris(AttackStack stack, AttackStack.Role target) throws Exception {
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("target", target.name() + " " + target.http());
        long limit = openFilesLimit();
        figures.put("harness_open_files_limit", limit);
        if (limit >= 0 && limit < settings.slowlorisConnections() + 512L) {
            progress.printf("  the open files limit (ulimit -n) is %d, below the %d this slowloris needs: raise it,"
                    + " or the connections past it fail to open%n", limit, settings.slowlorisConnections() + 512);
        }
        Slowloris slowloris = Slowloris.start(new InetSocketAddress("127.0.0.1", target.httpPort()),
                settings.attackerAddress(), settings.slowlorisConnections());
        Thread.sleep(settings.duration().toMillis());
        figures.putAll(slowloris.stop(5));
        return figures;
    }

    /**
     * N8, N9: the configured senders of bodies just under the limit to {@code target}'s completions, unsigned to
     * the proxy, signed with another secret ({@link AttackSigning#wrongSigner}) and a fresh time to a role.
     */
    Map<String, Object> bodies(AttackStack stack, LegitLoad load, AttackStack.Role target, boolean signed) throws Exception {
        byte[] body = BodyFlood.jsonBody(BODY_LIMIT - 64);
        AtomicReference<String> headers = new AtomicReference<>("Authorization: Bearer bodies\r\n");
        Thread signer = null;
        if (signed) {
            // one signature for every sender, made afresh every 5 s (well inside the 30 s a signature is fresh):
            // hashing 16 MiB per request would take the cores the roles need
            RequestAuth wrong = AttackSigning.wrongSigner();
            String transferId = "hostile-bodies-" + UUID.randomUUID();
            headers.set(AttackSigning.headerLines(wrong, "/v1/completions", transferId, target.http(), null, body));
            signer = Thread.ofVirtual().name("kvflux-bodies-signer").start(() -> {
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        Thread.sleep(5_000);
                    } catch (InterruptedException e) {
                        return;
                    }
                    headers.set(AttackSigning.headerLines(wrong, "/v1/completions", transferId, target.http(), null,
                            body));
                }
            });
        }
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("target", target.name() + " " + target.http());
        figures.put("signed_with_another_secret", signed);
        BodyFlood flood = BodyFlood.start(new InetSocketAddress("127.0.0.1", target.httpPort()),
                settings.attackerAddress(), settings.bodySenders(), body, headers::get);
        Thread.sleep(settings.duration().toMillis());
        // the legitimate figures are those of the sending; the wait for the answers still due is another phase
        load.phase("draining");
        progress.printf("  stopped sending; waiting for the bodies in flight (up to %d s each)...%n",
                BodyFlood.ANSWER_LIMIT_SECONDS);
        figures.putAll(flood.stop());
        if (signer != null) {
            signer.interrupt();
        }
        return figures;
    }

    /** N3, N4: one client, API key {@code hog}, keeping {@code concurrency} copies of {@code body} open. */
    Map<String, Object> hog(AttackStack stack, String body, int concurrency) throws Exception {
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("hog_concurrency", concurrency);
        figures.put("hog_request_bytes", body.length());
        AtomicLong minFree = new AtomicLong(Long.MAX_VALUE);
        Thread blocks = Thread.ofVirtual().name("kvflux-free-blocks").start(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                long free = freeBlocks(stack.decode(0));
                if (free >= 0) {
                    minFree.accumulateAndGet(free, Math::min);
                }
                try {
                    Thread.sleep(1_000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        long before = freeBlocks(stack.decode(0));
        HogClients hog = HogClients.start(stack.proxyUrl(), settings.attackerAddress(), "hog", body, concurrency);
        Thread.sleep(settings.duration().toMillis());
        figures.putAll(hog.stop());
        blocks.interrupt();
        figures.put("decode_free_blocks_before", before);
        figures.put("decode_free_blocks_min", minFree.get() == Long.MAX_VALUE ? -1 : minFree.get());
        return figures;
    }

    /**
     * N6: a stalling decode registers beside the real one; 16 streamed legitimate requests are sent at once while the
     * load goes on. How soon the proxy ejects it, and how the requests it was given ended.
     */
    Map<String, Object> stall(AttackStack stack, LegitLoad load) throws Exception {
        Map<String, Object> figures = new LinkedHashMap<>();
        long start = System.nanoTime();
        try (StallingDecode fake = StallingDecode.start(stack.discoveryUrl(), stack.secret())) {
            double registered = -1;
            double ejected = -1;
            while (registered < 0 && secondsSince(start) < 10) {
                if (ejected(stack, fake.http()) != null) {
                    registered = secondsSince(start);
                }
                Thread.sleep(100);
            }
            figures.put("fake_decode", fake.http());
            figures.put("fake_registered_after_s", AttackFigures.round(registered));
            HttpClient client = AttackClient.client("127.0.0.1", LegitLoad.API_KEY);
            Duration timeout = Duration.ofSeconds(Math.max(30, settings.duration().toSeconds()));
            List<LegitLoad.Request> probes = new java.util.concurrent.CopyOnWriteArrayList<>();
            long probeStart = System.nanoTime();
            var sent = Flux.range(0, 16).flatMap(i -> AttackClient.send(client, stack.proxyUrl() + "/v1/completions",
                            LegitLoad.body(true).getBytes(StandardCharsets.UTF_8), timeout)
                    .doOnNext(a -> probes.add(new LegitLoad.Request("probe", true, probeStart, a))), 16)
                    .then().toFuture();
            long until = start + Math.max(settings.duration().toNanos(), timeout.toNanos() + 2_000_000_000L);
            while (System.nanoTime() - until < 0 && !(sent.isDone() && secondsSince(start)
                    >= settings.duration().toSeconds())) {
                if (ejected < 0 && Boolean.TRUE.equals(ejected(stack, fake.http()))) {
                    ejected = secondsSince(start);
                    progress.printf("  the proxy ejected the stalling decode after %.1f s%n", ejected);
                }
                Thread.sleep(200);
            }
            sent.get();
            Set<String> routed = fake.transferIds();
            figures.put("ejected_after_s", AttackFigures.round(ejected));
            figures.put("requests_sent_to_fake", routed.size());
            figures.putAll(routedFigures("probe", probes, routed));
            figures.putAll(routedFigures("load", load.requests("during"), routed));
            List<LegitLoad.Request> all = new ArrayList<>(probes);
            all.addAll(load.requests("during"));
            figures.put("hung_past_15s", all.stream().filter(r -> r.answer().millis() > 15_000).count());
        }
        return figures;
    }

    /** The requests routed to the stalling decode among {@code requests}: how each ended and how long it took. */
    private static Map<String, Object> routedFigures(String name, List<LegitLoad.Request> requests,
            Set<String> routed) {
        List<LegitLoad.Request> toFake = requests.stream().filter(r -> routed.contains(r.answer().transferId()))
                .toList();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put(name + "_requests", requests.size());
        figures.put(name + "_routed_to_fake", toFake.size());
        figures.put(name + "_to_fake_outcomes", AttackFigures.counts(toFake.stream().map(LegitLoad.Request::outcome)
                .toList()));
        figures.put(name + "_to_fake_max_ms", AttackFigures.percentile(toFake.stream().map(r -> r.answer().millis())
                .toList(), 1.0));
        figures.put(name + "_others_outcomes", AttackFigures.counts(requests.stream()
                .filter(r -> !routed.contains(r.answer().transferId())).map(LegitLoad.Request::outcome).toList()));
        return figures;
    }

    /** N5: one non-streaming completion of 4,000 tokens through the proxy; whether decode was ever ejected. */
    Map<String, Object> longAnswer(AttackStack stack, LegitLoad load) throws Exception {
        AtomicInteger ejectedPolls = new AtomicInteger();
        AtomicInteger polls = new AtomicInteger();
        Thread poll = Thread.ofVirtual().name("kvflux-ejection-poll").start(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                Boolean ejected = ejected(stack, stack.decode(0).http());
                polls.incrementAndGet();
                if (Boolean.TRUE.equals(ejected)) {
                    ejectedPolls.incrementAndGet();
                }
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        AttackClient.Answer answer = AttackClient.post(AttackClient.client(settings.attackerAddress(), "long"),
                stack.proxyUrl() + "/v1/completions", "{\"prompt\":\"" + LegitLoad.PROMPT + "\",\"max_tokens\":4000}",
                Duration.ofSeconds(150));
        poll.interrupt();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("long_answer_max_tokens", 4000);
        figures.put("long_answer_status", answer.status());
        figures.put("long_answer_outcome", answer.outcome(false));
        figures.put("long_answer_s", AttackFigures.round(answer.millis() / 1000));
        figures.put("decode_ejected_ever", ejectedPolls.get() > 0);
        figures.put("decode_ejected_polls", ejectedPolls.get() + " of " + polls.get());
        return figures;
    }

    /**
     * N10: two decodes, A and B. The control: a completion as the proxy would sign it for A, sent to A, with its
     * prefill half sent to prefill as the proxy would, so that it can succeed. The attack, at the same time: another
     * completion signed for A, sent to B (with no prefill half: a request copied on its way to A and sent on).
     */
    Map<String, Object> destination(AttackStack stack, LegitLoad load) {
        AttackStack.Role a = stack.decode(0);
        AttackStack.Role b = stack.decode(1);
        AttackStack.Role prefill = stack.prefill();
        RequestAuth cluster = AttackSigning.signer(stack.secret());
        String control = "kvflux-" + UUID.randomUUID();
        String copied = "kvflux-" + UUID.randomUUID();
        var toPrefill = signedPost(cluster, prefill, control, Role.DECODE, a.notifyPort(), prefill);
        var toA = signedPost(cluster, a, control, Role.PREFILL, prefill.notifyPort(), a);
        var toB = signedPost(cluster, a, copied, Role.PREFILL, prefill.notifyPort(), b);
        var answers = reactor.core.publisher.Mono.zip(toPrefill, toA, toB).block();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("signed_for", a.name() + " " + a.http());
        figures.put("control_prefill_outcome", answers.getT1().outcome(false));
        figures.put("a_status", answers.getT2().status());
        figures.put("a_outcome", answers.getT2().outcome(false));
        figures.put("sent_to_b", b.name() + " " + b.http());
        figures.put("b_status", answers.getT3().status());
        figures.put("b_outcome", answers.getT3().outcome(false));
        figures.put("b_answer_ms", AttackFigures.round(answers.getT3().millis()));
        figures.put("b_refused_401", answers.getT3().status() == 401);
        return figures;
    }

    /**
     * A completion for {@code transferId} as the proxy would send it to {@code signedFor} (its peer of role
     * {@code peer} on {@code peerNotifyPort}), signed for {@code signedFor} and sent to {@code to}, from the
     * attacker's address; prefill's half asks for one token, as the proxy's does.
     */
    private reactor.core.publisher.Mono<AttackClient.Answer> signedPost(RequestAuth signer, AttackStack.Role signedFor,
            String transferId, Role peer, int peerNotifyPort, AttackStack.Role to) {
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("prompt", LegitLoad.PROMPT)
                .put("max_tokens", peer == Role.DECODE ? 1 : LegitLoad.MAX_TOKENS);
        if (peer == Role.DECODE) {
            json.put("stream", false);
        }
        new KvTransferParams(transferId, peer, InetSocketAddress.createUnresolved("127.0.0.1", peerNotifyPort))
                .into(json);
        byte[] body = HttpJson.write(json).getBytes(StandardCharsets.UTF_8);
        HttpHeaders signed = AttackSigning.sign(signer, "/v1/completions", transferId, signedFor.http(), null, body);
        HttpClient client = AttackClient.client(settings.attackerAddress(), null).headers(h -> h.add(signed));
        return AttackClient.send(client, "http://" + to.http() + "/v1/completions", body, Duration.ofSeconds(90));
    }

    /**
     * Whether the proxy's discovery {@code GET /health} shows the instance at {@code http} as ejected; null when it
     * does not list it or does not answer.
     */
    private static Boolean ejected(AttackStack stack, String http) {
        String health = stack.proxyHealth();
        if (health == null) {
            return null;
        }
        try {
            for (JsonNode instance : HttpJson.MAPPER.readTree(health).path("decode")) {
                if (http.equals(instance.path("http").asText())) {
                    return instance.path("ejected").asBoolean();
                }
            }
        } catch (IOException e) {
            return null;
        }
        return null;
    }

    /** Decode's free KV blocks from its {@code /metrics}, or -1 when it does not answer. */
    private static long freeBlocks(AttackStack.Role decode) {
        try {
            HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + decode.http()
                    + "/metrics")).timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofString());
            return res.statusCode() == 200 ? PrometheusText.parse(res.body()).count("kvflux_blocks", "state", "free")
                    : -1;
        } catch (IOException | RuntimeException e) {
            return -1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    /** The soft limit on this process's open files, from {@code /proc/self/limits}; -1 when it cannot be read. */
    static long openFilesLimit() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
                if (line.startsWith("Max open files")) {
                    String soft = line.substring("Max open files".length()).strip().split("\\s+")[0];
                    return soft.equals("unlimited") ? Long.MAX_VALUE : Long.parseLong(soft);
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return -1;
    }

    private static double secondsSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e9;
    }
}
