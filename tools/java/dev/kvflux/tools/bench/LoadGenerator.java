package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * A closed-loop client in the shape of {@code vllm bench serve --dataset-name random --ignore-eos}:
 * {@code numPrompts} streaming completions of {@code inputTokens} prompt tokens and
 * {@code outputTokens} output tokens, at most {@code concurrency} open at once.
 *
 * <p>Each request is measured from the moment it is sent: TTFT at the first streamed token, latency at
 * {@code [DONE]}. A request answered with an error status, or whose stream breaks, has failed; one still
 * open at {@code requestTimeout} is cancelled and counted as never finished, so every run ends. The sum
 * completed + failed + never finished is always {@code numPrompts}; a request refused at once (a proxy's 503
 * {@code proxy_overloaded}, or no connection to be had) has failed.
 */
public final class LoadGenerator {

    /** Live counts, read by progress displays from any thread. */
    public static final class Progress {
        final AtomicInteger completed = new AtomicInteger();
        final AtomicInteger failed = new AtomicInteger();
        final AtomicInteger neverFinished = new AtomicInteger();
        final AtomicInteger open = new AtomicInteger();

        public int completed() {
            return completed.get();
        }

        public int failed() {
            return failed.get();
        }

        public int neverFinished() {
            return neverFinished.get();
        }

        public int open() {
            return open.get();
        }
    }

    private final String completionsUrl;
    private final int numPrompts;
    private final int concurrency;
    private final int inputTokens;
    private final int outputTokens;
    private final Duration requestTimeout;

    /**
     * @throws IllegalArgumentException if a count or the request timeout is not positive
     */
    public LoadGenerator(String baseUrl, int numPrompts, int concurrency, int inputTokens, int outputTokens,
            Duration requestTimeout) {
        Objects.requireNonNull(baseUrl, "baseUrl");
        Objects.requireNonNull(requestTimeout, "requestTimeout");
        if (numPrompts < 1 || concurrency < 1 || inputTokens < 1 || outputTokens < 1) {
            throw new IllegalArgumentException("prompts, concurrency, input and output tokens must be at least 1,"
                    + " got " + numPrompts + ", " + concurrency + ", " + inputTokens + ", " + outputTokens);
        }
        if (requestTimeout.isZero() || requestTimeout.isNegative()) {
            throw new IllegalArgumentException("the request timeout must be greater than zero, got " + requestTimeout
                    + "; every request would count as never finished");
        }
        this.completionsUrl = baseUrl + "/v1/completions";
        this.numPrompts = numPrompts;
        this.concurrency = concurrency;
        this.inputTokens = inputTokens;
        this.outputTokens = outputTokens;
        this.requestTimeout = requestTimeout;
    }

    /** Runs the load and blocks until every request has a result; {@code progress} sees live counts. */
    public LoadResult run(Consumer<Progress> onStart) {
        Progress progress = new Progress();
        onStart.accept(progress);
        // at most `concurrency` requests are open (the flatMap below), so none should wait for a connection;
        // the pending bound only keeps a fault from queueing without limit, and a request it refuses fails
        ConnectionProvider pool = HttpLimits.pool("kvflux-bench").maxConnections(concurrency * 2)
                .pendingAcquireMaxCount(concurrency).build();
        try {
            HttpClient client = HttpClient.create(pool)
                    .headers(h -> h.set(HttpHeaderNames.CONTENT_TYPE, "application/json"));
            long start = System.nanoTime();
            List<RequestResult> results = Flux.range(0, numPrompts)
                    .flatMap(i -> one(client, i, progress), concurrency)
                    .collectList()
                    .block();
            double duration = (System.nanoTime() - start) / 1e9;
            return new LoadResult(results == null ? new ArrayList<>() : results, duration);
        } finally {
            pool.dispose();
        }
    }

    private Mono<RequestResult> one(HttpClient client, int index, Progress progress) {
        return Mono.defer(() -> {
            byte[] body = body(index);
            long sent = System.nanoTime();
            double[] firstToken = {Double.NaN};
            progress.open.incrementAndGet();
            return client.post().uri(completionsUrl)
                    .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body)))
                    .response((response, content) -> {
                        if (response.status().code() != 200) {
                            return content.aggregate().asString().defaultIfEmpty("")
                                    .map(text -> RequestResult.failed(Double.NaN, response.status().code() + " "
                                            + errorMessage(text)));
                        }
                        StreamWatch watch = new StreamWatch();
                        return content.asString(StandardCharsets.UTF_8)
                                .doOnNext(chunk -> {
                                    if (watch.accept(chunk) && Double.isNaN(firstToken[0])) {
                                        firstToken[0] = seconds(sent);
                                    }
                                })
                                .then(Mono.fromSupplier(() -> watch.done()
                                        ? RequestResult.completed(firstToken[0], seconds(sent))
                                        : RequestResult.failed(firstToken[0], "stream ended before [DONE]")));
                    })
                    .next()
                    .timeout(requestTimeout, Schedulers.parallel())
                    .onErrorResume(TimeoutException.class, e -> Mono.just(RequestResult.neverFinished(firstToken[0])))
                    .onErrorResume(e -> Mono.just(RequestResult.failed(firstToken[0], e.toString())))
                    .defaultIfEmpty(RequestResult.failed(firstToken[0], "no response"))
                    .doOnNext(result -> {
                        progress.open.decrementAndGet();
                        switch (result.outcome()) {
                            case COMPLETED -> progress.completed.incrementAndGet();
                            case FAILED -> progress.failed.incrementAndGet();
                            case NEVER_FINISHED -> progress.neverFinished.incrementAndGet();
                        }
                    });
        });
    }

    /** A random-dataset-like prompt of {@code inputTokens} words, distinct per request. */
    private byte[] body(int index) {
        StringBuilder prompt = new StringBuilder(inputTokens * 6);
        prompt.append("r").append(index);
        for (int i = 1; i < inputTokens; i++) {
            prompt.append(" w").append(i % 1000);
        }
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("model", "kvflux-sim")
                .put("prompt", prompt.toString()).put("max_tokens", outputTokens)
                .put("stream", true).put("ignore_eos", true);
        return HttpJson.write(json).getBytes(StandardCharsets.UTF_8);
    }

    private static String errorMessage(String text) {
        try {
            return HttpJson.object(text).at("/error/message").asText(text);
        } catch (IllegalArgumentException e) {
            return text;
        }
    }

    private static double seconds(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    /** Follows a server-sent-event stream across chunk boundaries: the first data event and the [DONE]. */
    private static final class StreamWatch {
        private final StringBuilder tail = new StringBuilder();
        private boolean sawData;
        private boolean done;

        /** Takes a chunk; returns whether a token event has been seen so far. */
        boolean accept(String chunk) {
            tail.append(chunk);
            if (!sawData && tail.indexOf("data: {") >= 0) {
                sawData = true;
            }
            if (tail.indexOf("data: [DONE]") >= 0) {
                done = true;
            }
            if (tail.length() > 64) {
                tail.delete(0, tail.length() - 64);
            }
            return sawData;
        }

        boolean done() {
            return done;
        }
    }
}
