package dev.kvflux.tools.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import reactor.netty.http.client.HttpClient;

/**
 * The legitimate traffic of an HTTP attack: {@value #CONCURRENCY} clients, each sending a small completion through
 * the proxy as soon as its last one ended ({@value #PROMPT}, {@value #MAX_TOKENS} tokens, every other one streamed),
 * as API key {@value #API_KEY} from {@code 127.0.0.1}, each on a connection of its own ({@link AttackClient}); after
 * a failure a client waits {@value #FAILURE_PAUSE_MS} ms before its next request, as a client backing off does (and
 * so that requests refused at once do not turn the load into a flood that takes the cores from the roles).
 * Every request is recorded with the phase ({@code warm}, {@code idle}, {@code during}, ...) current when it started,
 * so that one run of the load gives the idle baseline and the figures under attack.
 */
final class LegitLoad implements AutoCloseable {
    static final int CONCURRENCY = 4;
    static final String API_KEY = "legit";
    static final String PROMPT = "a b c d e f g h";
    static final int MAX_TOKENS = 8;
    /** How long a legitimate request may take before the client gives up on it. */
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    /** How long a client waits after a failed request. */
    static final long FAILURE_PAUSE_MS = 250;

    /** One legitimate request: the phase it started in, whether it streamed, and its answer. */
    record Request(String phase, boolean stream, long startNanos, AttackClient.Answer answer) {
        boolean ok() {
            return answer.ok(stream);
        }

        String outcome() {
            return answer.outcome(stream);
        }
    }

    private final HttpClient client = AttackClient.client("127.0.0.1", API_KEY);
    private final String completions;
    private final List<Request> requests = new CopyOnWriteArrayList<>();
    private final AtomicInteger sent = new AtomicInteger();
    private final List<Thread> clients = new ArrayList<>();
    private volatile String phase = "warm";
    private volatile boolean running = true;

    private LegitLoad(String proxyUrl) {
        this.completions = proxyUrl + "/v1/completions";
    }

    /** Starts the clients against {@code proxyUrl}, in phase {@code warm}. */
    static LegitLoad start(String proxyUrl) {
        LegitLoad load = new LegitLoad(proxyUrl);
        for (int c = 0; c < CONCURRENCY; c++) {
            load.clients.add(Thread.ofVirtual().name("kvflux-legit-" + c).start(load::loop));
        }
        return load;
    }

    /** The body of a legitimate completion. */
    static String body(boolean stream) {
        return "{\"prompt\":\"" + PROMPT + "\",\"max_tokens\":" + MAX_TOKENS + (stream ? ",\"stream\":true" : "")
                + "}";
    }

    private void loop() {
        while (running) {
            boolean stream = sent.getAndIncrement() % 2 == 1;
            String current = phase;
            long start = System.nanoTime();
            AttackClient.Answer answer = AttackClient.post(client, completions, body(stream), TIMEOUT);
            Request request = new Request(current, stream, start, answer);
            requests.add(request);
            if (!request.ok()) {
                try {
                    Thread.sleep(FAILURE_PAUSE_MS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    /** Requests started from now on are in {@code name}. */
    void phase(String name) {
        phase = name;
    }

    /** The requests of {@code phase} that have ended. */
    List<Request> requests(String phase) {
        return requests.stream().filter(r -> r.phase().equals(phase)).toList();
    }

    /** The requests that have ended and match {@code which}. */
    List<Request> requests(Predicate<Request> which) {
        return requests.stream().filter(which).toList();
    }

    /** Stops the clients and waits for their requests to end (at most {@link #TIMEOUT} more). */
    @Override
    public void close() throws InterruptedException {
        running = false;
        for (Thread t : clients) {
            t.join(TIMEOUT.plusSeconds(5).toMillis());
        }
    }

    /**
     * The figures of the legitimate traffic: requests and success rate idle and during the attack, p50 (over the
     * successful requests) idle and during and their ratio, p99 during, and the outcomes of the requests that failed
     * during the attack.
     */
    static Map<String, Object> figures(List<Request> idle, List<Request> during) {
        Map<String, Object> figures = new LinkedHashMap<>();
        long idleOk = idle.stream().filter(Request::ok).count();
        long duringOk = during.stream().filter(Request::ok).count();
        double p50Idle = AttackFigures.percentile(millis(idle), 0.5);
        double p50During = AttackFigures.percentile(millis(during), 0.5);
        figures.put("legit_requests_idle", idle.size());
        figures.put("legit_success_pct_idle", AttackFigures.percent(idleOk, idle.size()));
        figures.put("legit_requests_during", during.size());
        figures.put("legit_success_pct", AttackFigures.percent(duringOk, during.size()));
        figures.put("legit_p50_ms_idle", p50Idle);
        figures.put("legit_p50_ms_during", p50During);
        figures.put("legit_p50_ratio", AttackFigures.ratio(p50During, p50Idle));
        figures.put("legit_p99_ms_during", AttackFigures.percentile(millis(during), 0.99));
        figures.put("legit_failures_during", AttackFigures.counts(during.stream().filter(r -> !r.ok())
                .map(Request::outcome).toList()));
        return figures;
    }

    private static List<Double> millis(List<Request> requests) {
        return requests.stream().filter(Request::ok).map(r -> r.answer().millis()).toList();
    }
}
