package dev.kvflux.tools.bench;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/**
 * One client that keeps {@code concurrency} copies of one request open at once through the proxy, each sent again as
 * soon as it is answered, under one API key from the attacker's address ({@link AttackClient}). Stopping it cancels
 * the requests still open (their connections are closed, as a client that gives up closes them) and counts them.
 */
final class HogClients {
    private final List<AttackClient.Answer> answers = new CopyOnWriteArrayList<>();
    private final AtomicInteger started = new AtomicInteger();
    private final String key;
    private final Disposable running;
    private volatile boolean sending = true;

    private HogClients(String key, HttpClient client, String url, byte[] body, int concurrency) {
        this.key = key;
        Mono<AttackClient.Answer> one = Mono.defer(() -> {
            started.incrementAndGet();
            return AttackClient.send(client, url, body, Duration.ofMinutes(30));
        }).doOnNext(answers::add);
        this.running = Flux.range(0, concurrency)
                .flatMap(c -> one.repeat(() -> sending), concurrency)
                .subscribe();
    }

    /**
     * Starts {@code concurrency} requests of {@code body} to {@code proxyUrl}'s completions from {@code sourceAddress}
     * as API key {@code key}.
     */
    static HogClients start(String proxyUrl, String sourceAddress, String key, String body, int concurrency) {
        return new HogClients(key, AttackClient.client(sourceAddress, key), proxyUrl + "/v1/completions",
                body.getBytes(StandardCharsets.UTF_8), concurrency);
    }

    /** A completion of a prompt of {@code words} words {@code w} and {@code maxTokens}, not streamed. */
    static String body(int words, int maxTokens) {
        return "{\"prompt\":\"" + "w ".repeat(words).strip() + "\",\"max_tokens\":" + maxTokens + "}";
    }

    /**
     * Stops and returns the figures, each named {@code KEY_...}: requests started, their answers by outcome (status
     * and {@code error.code}), the median and 99th percentile time of the successful ones, and the requests still
     * open at the stop, cancelled.
     */
    Map<String, Object> stop() {
        sending = false;
        running.dispose();
        List<AttackClient.Answer> all = List.copyOf(answers);
        List<Double> ok = all.stream().filter(a -> a.ok(false)).map(AttackClient.Answer::millis).toList();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put(key + "_requests", started.get());
        figures.put(key + "_answers", AttackFigures.counts(all.stream().map(a -> a.outcome(false)).toList()));
        figures.put(key + "_ok_p50_ms", AttackFigures.percentile(ok, 0.5));
        figures.put(key + "_ok_p99_ms", AttackFigures.percentile(ok, 0.99));
        figures.put(key + "_open_at_end_cancelled", started.get() - all.size());
        return figures;
    }
}
