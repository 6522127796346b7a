package dev.kvflux.serving.observe;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.observation.Observation;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/** Spans leave a role by OTLP/HTTP, sent with the JDK's HTTP client. */
class TracingTest {

    private record Post(String path, String contentType, String body) {
    }

    @Test
    void anOtlpTracingSendsItsSpansToTheEndpointWhenClosed() {
        List<Post> posts = new CopyOnWriteArrayList<>();
        DisposableServer collector = HttpServer.create().host("127.0.0.1").port(0)
                .handle((request, response) -> request.receive().aggregate().asByteArray().defaultIfEmpty(new byte[0])
                        .doOnNext(bytes -> posts.add(new Post(request.path(),
                                request.requestHeaders().get("content-type"),
                                new String(bytes, StandardCharsets.ISO_8859_1))))
                        .then(response.status(200).send().then()))
                .bindNow();
        try (Tracing tracing = Tracing.otlp("http://127.0.0.1:" + collector.port() + "/v1/traces", 1.0,
                "kvflux-test")) {
            Observation.createNotStarted("kvflux.test.step", tracing.observationRegistry()).start().stop();
        } finally {
            collector.disposeNow();
        }

        assertThat(posts).singleElement().satisfies(post -> {
            assertThat(post.path()).isEqualTo("v1/traces");
            assertThat(post.contentType()).isEqualTo("application/x-protobuf");
            assertThat(post.body()).contains("kvflux.test.step").contains("kvflux-test");
        });
    }

    @Test
    void aSampleProbabilityOutsideZeroToOneIsRefused() {
        assertThatThrownBy(() -> Tracing.otlp("http://127.0.0.1:4318/v1/traces", 1.5, "kvflux-test"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("from 0 to 1");
    }
}
