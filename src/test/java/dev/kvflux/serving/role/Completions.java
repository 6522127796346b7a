package dev.kvflux.serving.role;

import dev.kvflux.serving.metrics.PrometheusText;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/** Posts completions straight to a prefill or decode instance, as the proxy would. */
final class Completions {
    private Completions() {
    }

    /** Emits the answer as {@code "<status> <body>"}. */
    static Mono<String> post(InetSocketAddress http, String body) {
        return HttpClient.create().post()
                .uri("http://127.0.0.1:" + http.getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text));
    }

    /**
     * Posts a completion signed as the proxy signs it (for the transfer id in the body), with {@code headers} adding
     * or changing headers after signing; emits the answer as {@code "<status> <body>"}.
     */
    static Mono<String> postSigned(InetSocketAddress http, String body, String transferId,
            dev.kvflux.serving.api.RequestAuth auth, java.util.function.Consumer<io.netty.handler.codec.http.HttpHeaders> headers) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        return HttpClient.create().headers(h -> {
                    auth.sign(h, "POST", "/v1/completions", transferId, destination(http), "", bytes);
                    headers.accept(h);
                }).post()
                .uri("http://127.0.0.1:" + http.getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(bytes)))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text));
    }

    /** A role's address as the proxy names it when it signs a request for it: {@code 127.0.0.1:PORT}. */
    static String destination(InetSocketAddress http) {
        return "127.0.0.1:" + http.getPort();
    }

    /** The instance's {@code /metrics} body, read as Prometheus text. */
    static PrometheusText metrics(InetSocketAddress http) {
        return PrometheusText.parse(HttpClient.create().get().uri("http://127.0.0.1:" + http.getPort() + "/metrics")
                .responseContent().aggregate().asString().block(java.time.Duration.ofSeconds(5)));
    }
}
