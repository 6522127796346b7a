package dev.kvflux.serving.etcd;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.test.StepVerifier;

/** A watch's stream is split into its lines, each bounded, however the bytes arrive. */
class EtcdJsonLinesTest {
    private static Flux<byte[]> chunks(String... parts) {
        return Flux.fromArray(parts).map(p -> p.getBytes(StandardCharsets.UTF_8));
    }

    private static List<String> lines(Flux<byte[]> chunks, int max) {
        return JsonLines.split(chunks, max).map(b -> new String(b, StandardCharsets.UTF_8)).collectList().block();
    }

    @Test
    void linesSplitAcrossChunksComeOutWhole() {
        assertThat(lines(chunks("{\"a\"", ":1}\n{\"b\":2}\n{", "\"c\":3}\n"), 64))
                .containsExactly("{\"a\":1}", "{\"b\":2}", "{\"c\":3}");
    }

    @Test
    void emptyLinesAreSkippedAndALastLineWithoutNewlineCounts() {
        assertThat(lines(chunks("\n\n{\"a\":1}\n\n", "{\"b\":2}"), 64)).containsExactly("{\"a\":1}", "{\"b\":2}");
    }

    @Test
    void aLineOverTheBoundFailsAsSoonAsItsBytesPassIt() {
        StepVerifier.create(JsonLines.split(chunks("{\"a\":1}\n", "x".repeat(40), "x".repeat(40), "never read"), 64)
                        .map(b -> new String(b, StandardCharsets.UTF_8)))
                .expectNext("{\"a\":1}")
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(EtcdException.class)
                        .hasMessageContaining("over the 64 bytes"))
                .verify();
    }

    @Test
    void aLineOfExactlyTheBoundIsRead() {
        assertThat(lines(chunks("y".repeat(64) + "\n"), 64)).containsExactly("y".repeat(64));
    }
}
