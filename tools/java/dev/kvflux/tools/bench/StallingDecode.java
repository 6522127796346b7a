package dev.kvflux.tools.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * A decode that stalls, run by a holder of the cluster's secret: it registers with the proxy's discovery port as a
 * real decode does (a signed {@code POST /register} of {@code {"role", "http", "notify", "incarnation"}} at once and
 * every 3 s), answers {@code GET /health} 200 {@code {"status":"ok"}}, and answers every completion with 200,
 * {@code text/event-stream} and one SSE comment ({@code : ok}), then sends nothing more and holds the connection
 * open. Its notify address is a {@link Blackhole}. It remembers the transfer ids of the requests it was sent.
 */
final class StallingDecode implements AutoCloseable {
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(2)).build();

    private final DisposableServer server;
    private final Blackhole notify;
    private final Set<String> transferIds = ConcurrentHashMap.newKeySet();
    private final Set<reactor.netty.Connection> connections = ConcurrentHashMap.newKeySet();
    private final Thread pinger;
    private volatile boolean running = true;

    private StallingDecode(String discoveryUrl, NotifyAuth secret) throws IOException {
        this.notify = Blackhole.open(256);
        this.server = HttpServer.create().host("127.0.0.1").port(0)
                .doOnConnection(connection -> {
                    connections.add(connection);
                    connection.onDispose(() -> connections.remove(connection));
                })
                .route(routes -> routes
                        .get("/health", (request, response) -> response
                                .header(HttpHeaderNames.CONTENT_TYPE, "application/json")
                                .sendString(Mono.just("{\"status\":\"ok\"}")))
                        .post("/v1/completions", (request, response) -> request.receive().aggregate()
                                .asString(StandardCharsets.UTF_8).defaultIfEmpty("")
                                .doOnNext(this::remember)
                                .then(Mono.from(response.header(HttpHeaderNames.CONTENT_TYPE, "text/event-stream")
                                        .sendString(Flux.concat(Mono.just(": ok\n\n"), Flux.never()))))))
                .bindNow();
        long incarnation = System.currentTimeMillis();
        byte[] registration = HttpJson.write(HttpJson.MAPPER.createObjectNode().put("role", "decode")
                .put("http", http()).put("notify", "127.0.0.1:" + notify.address().getPort())
                .put("incarnation", incarnation)).getBytes(StandardCharsets.UTF_8);
        RegistrationAuth signer = RegistrationAuth.of(secret);
        this.pinger = Thread.ofVirtual().name("kvflux-stalling-decode-pinger").start(() -> {
            while (running) {
                register(discoveryUrl, signer, registration);
                try {
                    Thread.sleep(3_000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
    }

    /** Starts the stalling decode and registers it with the proxy's discovery port at {@code discoveryUrl}. */
    static StallingDecode start(String discoveryUrl, NotifyAuth secret) throws IOException {
        return new StallingDecode(discoveryUrl, secret);
    }

    /** Its HTTP address as it registers it, {@code host:port}. */
    String http() {
        return "127.0.0.1:" + server.port();
    }

    /** The transfer ids of the completions the proxy sent it. */
    Set<String> transferIds() {
        return Set.copyOf(transferIds);
    }

    private void remember(String body) {
        try {
            JsonNode id = HttpJson.MAPPER.readTree(body).path("kv_transfer_params").path("transfer_id");
            transferIds.add(id.isTextual() ? id.asText() : "unnamed-" + transferIds.size());
        } catch (IOException e) {
            transferIds.add("unparsed-" + transferIds.size());
        }
    }

    private static void register(String discoveryUrl, RegistrationAuth signer, byte[] body) {
        HttpHeaders signed = signer.sign(new DefaultHttpHeaders(), body);
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(discoveryUrl + "/register"))
                .timeout(Duration.ofSeconds(3)).header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        for (Map.Entry<String, String> header : signed) {
            request.header(header.getKey(), header.getValue());
        }
        try {
            HTTP.send(request.build(), HttpResponse.BodyHandlers.discarding());
        } catch (IOException e) {
            // the next ping tries again, as a real instance's does
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops pinging and closes its ports and every connection it holds. */
    @Override
    public void close() throws IOException {
        running = false;
        pinger.interrupt();
        server.dispose();
        connections.forEach(reactor.netty.Connection::dispose);
        notify.close();
    }
}
