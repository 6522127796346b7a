package dev.kvflux.tools.bench;

import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.client.PrematureCloseException;

/**
 * The HTTP client of {@code kvflux hostile}'s HTTP attacks, for the legitimate traffic and for the attackers that send
 * whole requests (the hog, the long answer): each request on a connection of its own, as a client's first request
 * is, so that a connection the proxy already accepted earlier never spares it what the attack does to new ones; from
 * a source address of its choosing (the attacker's is another loopback address than the legitimate clients', as
 * another host's would be), with the client's API key as a bearer token. Each answer is read whole and timed from
 * the moment the request is sent; a failure is told apart by where it happened (no connection, reset before the
 * answer's head, reset during its body, no end within the timeout).
 */
final class AttackClient {
    /** The proxy's header naming the transfer id it gave the request. */
    static final String TRANSFER_HEADER = "x-kvflux-transfer-id";

    /**
     * An answer, or what stood for one.
     *
     * @param status the answer's status, or 0 when no answer head came
     * @param transferId the proxy's transfer id for it, or null when it named none
     * @param body the answer's body, empty when there was none
     * @param failure null for an answer read whole, else {@code refused}, {@code reset_before_head},
     *     {@code reset_during_body}, {@code timeout} (no head within the timeout), {@code timeout_after_head} (a head
     *     but no end), or the error's class name
     * @param millis from the request's start to its end, or to the failure
     */
    record Answer(int status, String transferId, String body, String failure, double millis) {
        /** Its outcome: the failure, or the answer's ({@link AttackFigures#outcome}). */
        String outcome(boolean stream) {
            return failure != null ? failure : AttackFigures.outcome(status, body, stream);
        }

        /** Whether it is a whole, successful answer. */
        boolean ok(boolean stream) {
            return AttackFigures.OK.equals(outcome(stream));
        }
    }

    private AttackClient() {
    }

    /**
     * A client that opens a connection per request from {@code sourceAddress} (an address of this host, e.g.
     * {@code 127.0.0.2}) and sends {@code Authorization: Bearer apiKey} when {@code apiKey} is not null.
     */
    static HttpClient client(String sourceAddress, String apiKey) {
        return HttpClient.newConnection()
                .bindAddress(() -> new InetSocketAddress(sourceAddress, 0))
                .headers(h -> {
                    h.set(HttpHeaderNames.CONTENT_TYPE, "application/json");
                    if (apiKey != null) {
                        h.set(HttpHeaderNames.AUTHORIZATION, "Bearer " + apiKey);
                    }
                });
    }

    /** POSTs {@code body} to {@code url} and waits at most {@code timeout} for the whole answer. */
    static Answer post(HttpClient client, String url, String body, Duration timeout) {
        return post(client, url, body.getBytes(StandardCharsets.UTF_8), timeout);
    }

    /** As {@link #post(HttpClient, String, String, Duration)}, with the body's bytes. */
    static Answer post(HttpClient client, String url, byte[] body, Duration timeout) {
        return send(client, url, body, timeout).block();
    }

    /** The request of {@link #post}, sent when subscribed; it never fails, its failures are answers. */
    static Mono<Answer> send(HttpClient client, String url, byte[] body, Duration timeout) {
        return Mono.defer(() -> {
            long start = System.nanoTime();
            AtomicInteger status = new AtomicInteger();
            AtomicReference<String> transferId = new AtomicReference<>();
            return client.doOnResponse((response, connection) -> {
                        status.set(response.status().code());
                        transferId.set(response.responseHeaders().get(TRANSFER_HEADER));
                    })
                    .post().uri(url)
                    .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body)))
                    .responseSingle((response, content) -> content.asString(StandardCharsets.UTF_8).defaultIfEmpty("")
                            .map(text -> new Answer(response.status().code(), transferId.get(), text, null,
                                    millisSince(start))))
                    .timeout(timeout)
                    .onErrorResume(e -> Mono.just(new Answer(status.get(), transferId.get(), "",
                            failure(e, status.get() != 0), millisSince(start))));
        });
    }

    /** What a request's failure was, in one word. */
    static String failure(Throwable e, boolean headSeen) {
        if (e instanceof TimeoutException) {
            return headSeen ? "timeout_after_head" : "timeout";
        }
        if (e instanceof ConnectException || e.getCause() instanceof ConnectException) {
            return "refused";
        }
        if (e instanceof PrematureCloseException || (e.getMessage() != null
                && e.getMessage().contains("Connection reset"))) {
            return headSeen ? "reset_during_body" : "reset_before_head";
        }
        return e.getClass().getSimpleName();
    }

    static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }
}
