package dev.kvflux.tools.chaos;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.observe.HistoryLog;
import dev.kvflux.tools.chaos.history.ClientOutcomes;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * The load of one chaos fault: {@link ChaosRun.Settings#requests()} completions at the run's concurrency (the fault's
 * burst all at once), the fault struck once a third of them have started and the last third sent once it is over,
 * each answer classified: completed with the expected text, failed with a reason, failed without one, cancelled by
 * its client, never finished within the request timeout, or corrupt.
 */
final class ChaosLoad {
    enum Outcome { COMPLETED, FAILED_CLEANLY, FAILED_WITHOUT_REASON, CANCELLED, NEVER_FINISHED, CORRUPT }

    /** One request's outcome; {@code via}: the proxy that answered it (0 unless there are several). */
    record Result(int index, long startNanos, long endNanos, Outcome outcome, String reason, int via) {
        Result(int index, long startNanos, long endNanos, Outcome outcome, String reason) {
            this(index, startNanos, endNanos, outcome, reason, 0);
        }

        Result via(int proxy) {
            return new Result(index, startNanos, endNanos, outcome, reason, proxy);
        }
    }

    private final ChaosRun.Settings settings;
    /** The transfer id the proxy answered each request of the running load with ({@code x-kvflux-transfer-id}). */
    private final Map<Integer, String> transferIds = new java.util.concurrent.ConcurrentHashMap<>();

    ChaosLoad(ChaosRun.Settings settings) {
        this.settings = settings;
    }

    /** A blocking fault action, run once a third of the requests have started. */
    interface FaultAction {
        void run() throws Exception;
    }

    /** The load: request {@code i} goes to {@code bases.get(i % bases.size())}. */
    List<Result> run(ChaosFault fault, List<String> bases, FaultAction action) throws InterruptedException {
        int n = settings.requests();
        int burstFrom = n / 3;
        int burstTo = fault.bursts() ? 2 * n / 3 : burstFrom;
        ConnectionProvider pool = ConnectionProvider.builder("kvflux-chaos").maxConnections(n + 16)
                .pendingAcquireMaxCount(-1).build();
        HttpClient http = HttpClient.create(pool);
        List<Result> results = Collections.synchronizedList(new ArrayList<>());
        long t0 = System.nanoTime();
        Thread[] faulting = new Thread[1];
        java.util.concurrent.atomic.AtomicReference<IllegalStateException> failed =
                new java.util.concurrent.atomic.AtomicReference<>();
        Sinks.Empty<Void> faultDone = Sinks.empty();
        int afterFault = Math.max(burstTo, 2 * n / 3);
        Flux<Integer> steady = Flux.range(0, n).filter(i -> i < burstFrom || i >= burstTo);
        Mono<Void> steadyLoad = steady.flatMap(i -> {
            if (i == burstFrom && faulting[0] == null) {
                faulting[0] = Thread.ofPlatform().name("kvflux-chaos-fault").start(() -> {
                    try {
                        action.run();
                    } catch (Exception | Error e) {
                        failed.set(new IllegalStateException("fault " + fault.label() + " could not be injected: "
                                + e.getMessage(), e));
                    } finally {
                        faultDone.tryEmitEmpty();
                    }
                });
            }
            Mono<Result> one = Mono.defer(() -> request(http, bases, fault, i)).doOnNext(results::add);
            // the last third goes out only once the fault is over, so there is an "after" to measure
            return i >= afterFault ? faultDone.asMono().then(one) : one;
        }, settings.concurrency()).then();
        Mono<Void> burstLoad = Flux.range(burstFrom, burstTo - burstFrom)
                .flatMap(i -> request(http, bases, fault, i).doOnNext(results::add), Math.max(1, burstTo - burstFrom))
                .then()
                .doFinally(signal -> {
                    if (burstTo > burstFrom) {
                        faultDone.tryEmitEmpty();
                    }
                });
        // the burst goes out all at once when the steady load reaches it
        Mono<Void> delayedBurst = Mono.defer(() -> burstLoad).delaySubscription(Flux.interval(Duration.ofMillis(5))
                .filter(tick -> results.size() >= burstFrom || faulting[0] != null).next());
        Mono.when(steadyLoad, delayedBurst).block();
        if (faulting[0] != null) {
            faulting[0].join();
        }
        pool.dispose();
        if (failed.get() != null) {
            throw failed.get();
        }
        writeOutcomes(fault, t0, results);
        return new ArrayList<>(results);
    }

    /** The load's client history ({@link ClientOutcomes}), for the history checker; times on the wall clock. */
    private void writeOutcomes(ChaosFault fault, long t0, List<Result> results) {
        long wall = HistoryLog.nowMicros();
        long nanos = System.nanoTime();
        List<ClientOutcomes.Outcome> outcomes = new ArrayList<>();
        synchronized (results) {
            for (Result r : results) {
                outcomes.add(new ClientOutcomes.Outcome(r.index(), transferIds.get(r.index()), r.outcome() + " "
                        + r.reason(), wall - (nanos - r.endNanos()) / 1_000));
            }
        }
        try {
            ClientOutcomes.write(settings.logDir(), fault.label(), wall - (nanos - t0) / 1_000, outcomes);
        } catch (IOException e) {
            throw new IllegalStateException("cannot write the client's history into " + settings.logDir() + ": "
                    + e.getMessage(), e);
        } finally {
            transferIds.clear();
        }
    }

    /**
     * Request {@code i} through proxy {@code i % bases.size()}; when that proxy refuses the connection (it is down), the
     * next one, as a client behind a load balancer would be sent on. A request cut after it was sent is not sent again.
     */
    private Mono<Result> request(HttpClient http, List<String> bases, ChaosFault fault, int i) {
        int first = i % bases.size();
        Mono<Result> answer = request(http, bases.get(first), fault, i).map(r -> r.via(first));
        for (int k = 1; k < bases.size(); k++) {
            int next = (first + k) % bases.size();
            answer = answer.flatMap(r -> r.outcome == Outcome.FAILED_WITHOUT_REASON && "ConnectRefused".equals(r.reason)
                    ? request(http, bases.get(next), fault, i).map(again -> again.via(next)) : Mono.just(r));
        }
        return answer;
    }

    private Mono<Result> request(HttpClient http, String base, ChaosFault fault, int i) {
        boolean invalid = fault.request(i) == ChaosFault.Request.INVALID;
        boolean disconnect = fault.request(i) == ChaosFault.Request.DISCONNECT;
        boolean burst = fault.bursts() && i >= settings.requests() / 3 && i < 2 * settings.requests() / 3;
        String body = invalid ? invalidBody(i) : HttpJson.write(HttpJson.MAPPER.createObjectNode()
                .put("prompt", "w ".repeat(burst ? settings.promptWords() * 16 : settings.promptWords()).trim())
                .put("max_tokens", settings.maxTokens()).put("stream", false));
        long start = System.nanoTime();
        Mono<Result> answer = http.post().uri(base + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .doOnNext(text -> noteTransfer(i, res.responseHeaders().get("x-kvflux-transfer-id")))
                        .map(text -> classify(i, start, res.status().code(), text)))
                .timeout(settings.requestTimeout(), Schedulers.parallel())
                .onErrorResume(e -> Mono.just(new Result(i, start, System.nanoTime(),
                        e instanceof TimeoutException ? Outcome.NEVER_FINISHED : Outcome.FAILED_WITHOUT_REASON,
                        e instanceof TimeoutException ? "no answer" : e instanceof java.net.ConnectException
                                ? "ConnectRefused" : e.getClass().getSimpleName())));
        if (disconnect) {
            Duration after = Duration.ofMillis(ThreadLocalRandom.current().nextInt(1, 30));
            return Mono.firstWithSignal(answer, Mono.delay(after, Schedulers.parallel())
                    .map(tick -> new Result(i, start, System.nanoTime(), Outcome.CANCELLED, "client went away")));
        }
        return answer;
    }

    private void noteTransfer(int i, String transferId) {
        if (transferId != null && transferId.length() <= 200) {
            transferIds.put(i, transferId);
        }
    }

    private static String invalidBody(int i) {
        return switch ((i / 3) % 4) {
            case 0 -> "{\"max_tokens\": 4}";
            case 1 -> "{\"prompt\": \"a b\", \"max_tokens\": -1}";
            case 2 -> "{\"prompt\": ";
            default -> "{\"prompt\": 42}";
        };
    }

    private Result classify(int i, long start, int status, String text) {
        long end = System.nanoTime();
        if (status == 200) {
            try {
                JsonNode json = HttpJson.MAPPER.readTree(text);
                String got = json.path("choices").path(0).path("text").asText(null);
                StringBuilder expected = new StringBuilder();
                for (int t = 0; t < settings.maxTokens(); t++) {
                    expected.append(" t").append(t);
                }
                return new Result(i, start, end, expected.toString().equals(got) ? Outcome.COMPLETED : Outcome.CORRUPT,
                        "200");
            } catch (IOException e) {
                return new Result(i, start, end, Outcome.CORRUPT, "200 with a body that is not JSON");
            }
        }
        try {
            JsonNode error = HttpJson.MAPPER.readTree(text).path("error");
            String message = error.path("message").asText("");
            if (!message.isBlank()) {
                return new Result(i, start, end, Outcome.FAILED_CLEANLY, status + " " + error.path("code").asText("?"));
            }
        } catch (IOException e) {
            // no JSON: no reason
        }
        return new Result(i, start, end, Outcome.FAILED_WITHOUT_REASON, status + " without a reason");
    }
}
