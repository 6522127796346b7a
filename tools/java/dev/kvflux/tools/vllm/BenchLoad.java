package dev.kvflux.tools.vllm;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A closed-loop client load for {@code kvflux proxy-bench}: {@code concurrency} clients, each sending a small
 * completion as soon as its last one is answered, until stopped; every request's start, end and outcome is kept, so
 * that a window of the run can be looked at alone (the requests after a fault, say).
 */
final class BenchLoad implements AutoCloseable {
    /** One request: when it started and ended (nanoTime), its status (0: no answer) and what failed. */
    record Sample(long startNanos, long endNanos, int status, String error) {
        boolean ok() {
            return status == 200;
        }

        double millis() {
            return (endNanos - startNanos) / 1e6;
        }
    }

    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final String BODY = "{\"prompt\": \"a b c d e f g h\", \"max_tokens\": 4}";

    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();
    private final ConcurrentLinkedQueue<Sample> samples = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean running = new AtomicBoolean(true);
    private final List<Thread> workers = new ArrayList<>();

    private BenchLoad(URI target, int concurrency) {
        HttpRequest request = HttpRequest.newBuilder(target).timeout(TIMEOUT)
                .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(BODY)).build();
        for (int i = 0; i < concurrency; i++) {
            workers.add(Thread.ofVirtual().name("kvflux-proxy-bench-client").start(() -> loop(request)));
        }
    }

    /** Starts {@code concurrency} clients against {@code port}'s {@code /v1/completions}. */
    static BenchLoad start(int port, int concurrency) {
        return new BenchLoad(URI.create("http://127.0.0.1:" + port + "/v1/completions"), concurrency);
    }

    private void loop(HttpRequest request) {
        while (running.get()) {
            long start = System.nanoTime();
            try {
                HttpResponse<String> answer = client.send(request, HttpResponse.BodyHandlers.ofString());
                samples.add(new Sample(start, System.nanoTime(), answer.statusCode(),
                        answer.statusCode() == 200 ? null : code(answer.body())));
            } catch (java.net.http.HttpTimeoutException e) {
                samples.add(new Sample(start, System.nanoTime(), 0, "no answer in 30 s"));
            } catch (java.io.IOException e) {
                samples.add(new Sample(start, System.nanoTime(), 0, e.getClass().getSimpleName()));
                sleep(10);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private static String code(String body) {
        int at = body.indexOf("\"code\"");
        if (at < 0) {
            return body.length() > 40 ? body.substring(0, 40) : body;
        }
        int start = body.indexOf('"', at + 7);
        int end = start < 0 ? -1 : body.indexOf('"', start + 1);
        return start < 0 || end < 0 ? "?" : body.substring(start + 1, end);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Every request ended so far. */
    List<Sample> samples() {
        return List.copyOf(samples);
    }

    /** The requests that started in {@code [fromNanos, toNanos)}. */
    List<Sample> startedBetween(long fromNanos, long toNanos) {
        return samples.stream().filter(s -> s.startNanos() >= fromNanos && s.startNanos() < toNanos).toList();
    }

    /** The {@code p}-th percentile (0 to 100) of the successful requests' latencies, in ms; NaN when none. */
    static double percentile(List<Sample> samples, double p) {
        double[] ok = samples.stream().filter(Sample::ok).mapToDouble(Sample::millis).sorted().toArray();
        if (ok.length == 0) {
            return Double.NaN;
        }
        return ok[Math.min(ok.length - 1, (int) Math.ceil(p / 100.0 * ok.length) - 1 < 0 ? 0
                : (int) Math.ceil(p / 100.0 * ok.length) - 1)];
    }

    /** Successful requests of {@code samples}, in percent; NaN when there are none. */
    static double successPct(List<Sample> samples) {
        return samples.isEmpty() ? Double.NaN : 100.0 * samples.stream().filter(Sample::ok).count() / samples.size();
    }

    /** Stops the clients; those waiting for an answer get it first (at most the request timeout). */
    @Override
    public void close() throws InterruptedException {
        running.set(false);
        for (Thread worker : workers) {
            worker.join(TIMEOUT.toMillis() + 5_000);
        }
    }

    /** Requests still without an answer when the load stopped. */
    int unfinished() {
        return (int) workers.stream().filter(Thread::isAlive).count();
    }

    @Override
    public String toString() {
        return "BenchLoad" + Arrays.toString(new int[] {samples.size()});
    }
}
