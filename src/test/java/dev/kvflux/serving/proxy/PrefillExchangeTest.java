package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * Prefill's exchange outlives decode's answer: a prefill that answers after decode's answer has reached the client is
 * read to its end on its connection, which goes back to the pool, instead of being cancelled and its connection
 * closed under a pool that may already have handed it to the next request.
 */
class PrefillExchangeTest {
    private static final int REQUESTS = 5;

    private final AtomicInteger prefillConnectionsClosed = new AtomicInteger();
    private final AtomicInteger prefillAnswered = new AtomicInteger();
    private final BlockingQueue<Sinks.Empty<Void>> prefillsWaiting = new LinkedBlockingQueue<>();
    private DisposableServer prefill;
    private DisposableServer decode;
    private ProxyServer proxy;

    @AfterEach
    void stop() {
        if (proxy != null) {
            proxy.close();
        }
        prefill.disposeNow();
        decode.disposeNow();
    }

    @Test
    void aPrefillAnswerThatComesAfterDecodesIsReadWholeAndItsConnectionKept() throws InterruptedException {
        // prefill answers only when the test lets it, after the client has had decode's whole answer
        prefill = HttpServer.create().host("127.0.0.1").port(0)
                .doOnChannelInit((observer, channel, remote) -> {
                    channel.closeFuture().addListener(closed -> prefillConnectionsClosed.incrementAndGet());
                })
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(Mono.defer(() -> {
                    Sinks.Empty<Void> gate = Sinks.empty();
                    prefillsWaiting.add(gate);
                    return gate.asMono();
                })).then(res.header("content-type", "application/json").sendString(Mono.just("{\"choices\":[]}"))
                        .then())
                        .doOnSuccess(v -> prefillAnswered.incrementAndGet())))
                .bindNow();
        decode = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.post("/v1/completions", (req, res) -> req.receive().then(
                        res.header("content-type", "application/json")
                                .sendString(Mono.just("{\"choices\":[{\"text\":\"x\"}]}")).then())))
                .bindNow();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(new Instance(Role.PREFILL, at(prefill), new InetSocketAddress("127.0.0.1", 7001)));
        registry.ping(new Instance(Role.DECODE, at(decode), new InetSocketAddress("127.0.0.1", 7002)));
        // no health check within the test: its probes would share the pool with the requests
        proxy = ProxyServer.builder().registry(registry).healthChecks(Duration.ofMinutes(10), InstanceHealth.defaults())
                .bindNow();

        for (int i = 0; i < REQUESTS; i++) {
            String answer = ProxyServerTest.post(proxy.address(), "/v1/completions",
                    "{\"prompt\": \"a b c\", \"max_tokens\": 2}");
            assertThat(answer).as("request %d, answered by decode before prefill answered", i).startsWith("200 ");
            Sinks.Empty<Void> waiting = prefillsWaiting.poll(10, TimeUnit.SECONDS);
            assertThat(waiting).as("prefill's request %d", i).isNotNull();
            waiting.tryEmitEmpty();
            long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (prefillAnswered.get() <= i && System.nanoTime() < until) {
                Thread.sleep(5);
            }
            assertThat(prefillAnswered).as("prefill's answer %d sent whole", i).hasValue(i + 1);
        }

        assertThat(prefillConnectionsClosed).as("prefill connections the proxy closed").hasValue(0);
    }

    private static InetSocketAddress at(DisposableServer server) {
        return new InetSocketAddress("127.0.0.1", ((InetSocketAddress) server.address()).getPort());
    }
}
