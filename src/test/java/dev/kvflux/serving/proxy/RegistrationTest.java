package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Registrations on the proxy's discovery port: signed with the cluster secret, bounded per role. */
class RegistrationTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final String SECRET = "registration-test-secret-0123456789";
    private static final String DECODE = "{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"127.0.0.1:8201\"}";

    private ProxyServer proxy;

    @AfterEach
    void close() {
        if (proxy != null) {
            proxy.close();
        }
    }

    private InstanceRegistry securedProxy() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry)
                .registrationSecret(NotifyAuth.of(SECRET)).bindNow();
        return registry;
    }

    private String register(String body, HttpHeaders headers) {
        return HttpClient.create().headers(h -> h.add(headers))
                .post().uri("http://127.0.0.1:" + proxy.discoveryAddress().getPort() + "/register")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    private static HttpHeaders signed(NotifyAuth secret, String body) {
        return RegistrationAuth.of(secret).sign(new DefaultHttpHeaders(), body.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void unsignedRegistrationIsRefusedWhenTheProxyHasASecret() {
        InstanceRegistry registry = securedProxy();

        String answer = register(DECODE, new DefaultHttpHeaders());

        assertThat(answer).startsWith("401 ").contains("not signed").contains("notify.secret");
        assertThat(registry.live(Role.DECODE)).isEmpty();
    }

    @Test
    void registrationSignedWithTheClusterSecretIsAccepted() {
        InstanceRegistry registry = securedProxy();

        String answer = register(DECODE, signed(NotifyAuth.of(SECRET), DECODE));

        assertThat(answer).startsWith("200 ");
        assertThat(registry.live(Role.DECODE)).hasSize(1);
    }

    @Test
    void registrationSignedWithAnotherSecretOrAlteredIsRefused() {
        InstanceRegistry registry = securedProxy();

        String otherSecret = register(DECODE, signed(NotifyAuth.of("another-secret-of-the-right-size"), DECODE));
        String altered = register(DECODE.replace("8201", "9999"), signed(NotifyAuth.of(SECRET), DECODE));

        assertThat(otherSecret).startsWith("401 ").contains("signature is wrong");
        assertThat(altered).startsWith("401 ").contains("signature is wrong");
        assertThat(registry.live(Role.DECODE)).isEmpty();
    }

    @Test
    void registrationSignedLongerAgoThanTheMaxAgeIsRefused() {
        InstanceRegistry registry = securedProxy();
        VirtualTimeScheduler past = VirtualTimeScheduler.create();
        past.advanceTimeTo(java.time.Instant.ofEpochMilli(System.currentTimeMillis() - 60_000));

        String answer = register(DECODE, signed(NotifyAuth.of(SECRET).clock(past), DECODE));

        assertThat(answer).startsWith("401 ").contains("beyond the 30000 ms allowed");
        assertThat(registry.live(Role.DECODE)).isEmpty();
    }

    @Test
    void aReplayedSignedRegistrationIsRefused() {
        securedProxy();
        HttpHeaders once = signed(NotifyAuth.of(SECRET), DECODE);

        String first = register(DECODE, once);
        String replayed = register(DECODE, once);

        assertThat(first).startsWith("200 ");
        assertThat(replayed).startsWith("401 ").contains("replay");
    }

    @Test
    void malformedSignatureHeadersAreRefusedWithoutAnError() {
        securedProxy();
        HttpHeaders bad = new DefaultHttpHeaders().set(RegistrationAuth.TS_HEADER, "soon")
                .set(RegistrationAuth.SIGNATURE_HEADER, "zz");

        assertThat(register(DECODE, bad)).startsWith("401 ").contains("malformed");
    }

    @Test
    void aFloodOfNewInstancesNeitherEvictsNorStarvesTheLiveOnes() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30), VirtualTimeScheduler.create(), 4);
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry).bindNow();
        assertThat(register(DECODE, new DefaultHttpHeaders())).startsWith("200 ");

        List<String> flood = Flux.range(0, 200)
                .flatMap(i -> Mono.fromCallable(() -> register("{\"role\": \"decode\", \"http\": \"10.0.0." + (i % 250)
                        + ":" + (1000 + i) + "\", \"notify\": \"10.0.1." + (i % 250) + ":" + (1000 + i) + "\"}",
                        new DefaultHttpHeaders())), 8)
                .collectList().block(Duration.ofSeconds(60));
        String refresh = register(DECODE, new DefaultHttpHeaders());

        assertThat(flood).filteredOn(a -> a.startsWith("200 ")).hasSize(3);
        assertThat(flood).filteredOn(a -> a.startsWith("503 ")).hasSize(197)
                .allSatisfy(a -> assertThat(a).contains("instance_cap"));
        assertThat(refresh).as("the live instance keeps pinging").startsWith("200 ");
        assertThat(registry.live(Role.DECODE)).hasSize(4)
                .contains(new Instance(Role.DECODE, Instance.address("127.0.0.1:8200"), Instance.address("127.0.0.1:8201")));
        assertThat(registry.refusedFull()).isEqualTo(197);
    }

    @Test
    void aRegistrationClaimingALiveInstancesAddressWithOtherPortsIsRefusedAndCounted() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30), VirtualTimeScheduler.create(), 64);
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry).bindNow();
        assertThat(register(DECODE, new DefaultHttpHeaders())).startsWith("200 ");

        String sameHttp = register("{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"10.9.9.9:7\"}",
                new DefaultHttpHeaders());
        String sameNotify = register("{\"role\": \"prefill\", \"http\": \"10.9.9.9:8\", \"notify\": \"127.0.0.1:8201\"}",
                new DefaultHttpHeaders());

        assertThat(sameHttp).startsWith("409 ").contains("address_claimed");
        assertThat(sameNotify).startsWith("409 ").contains("address_claimed");
        assertThat(registry.live(Role.DECODE)).containsExactly(new Instance(Role.DECODE,
                Instance.address("127.0.0.1:8200"), Instance.address("127.0.0.1:8201")));
        assertThat(registry.live(Role.PREFILL)).isEmpty();
        assertThat(registry.refusedClaims()).isEqualTo(2);
    }

    /** An instance's HTTP port whose {@code /health} says it is incarnation {@code incarnation} with {@code notify}. */
    private static reactor.netty.DisposableServer answeringAs(long incarnation, String notify) {
        return reactor.netty.http.server.HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("{\"status\": \"ok\", \"role\":"
                        + " \"decode\", \"incarnation\": " + incarnation + ", \"notify\": \"" + notify + "\"}"))))
                .bindNow();
    }

    private static String registration(int httpPort, String notify, long incarnation) {
        return "{\"role\": \"decode\", \"http\": \"127.0.0.1:" + httpPort + "\", \"notify\": \"" + notify
                + "\", \"incarnation\": " + incarnation + "}";
    }

    @Test
    void theInstanceAnsweringAtAnAddressTakesItBackFromASquatterAtOnce() {
        reactor.netty.DisposableServer real = answeringAs(7, "127.0.0.1:8301");
        try {
            InstanceRegistry registry = securedProxy();
            // while the real instance was away, another holder of the secret registered its HTTP address
            String squatted = registration(real.port(), "127.0.0.1:9999", 5);
            assertThat(register(squatted, signed(NotifyAuth.of(SECRET), squatted))).startsWith("200 ");

            String back = registration(real.port(), "127.0.0.1:8301", 7);
            String answer = register(back, signed(NotifyAuth.of(SECRET), back));

            assertThat(answer).startsWith("200 ");
            assertThat(registry.live(Role.DECODE)).extracting(i -> Instance.hostPort(i.notifyAddress()))
                    .containsExactly("127.0.0.1:8301");
            assertThat(registry.impostors()).isEqualTo(1);
            String again = registration(real.port(), "127.0.0.1:9999", 6);
            assertThat(register(again, signed(NotifyAuth.of(SECRET), again))).as("the squatter, again")
                    .startsWith("409 ").contains("address_claimed");
        } finally {
            real.disposeNow();
        }
    }

    @Test
    void aRegistrationWhoseAddressAnswersAsAnotherInstanceIsDroppedByTheHealthChecks() throws InterruptedException {
        reactor.netty.DisposableServer real = answeringAs(7, "127.0.0.1:8301");
        try {
            InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
            proxy = ProxyServer.builder().discoveryPort(0).registry(registry)
                    .healthChecks(Duration.ofMillis(50), InstanceHealth.defaults()).bindNow();
            String squatted = registration(real.port(), "127.0.0.1:9999", 5);
            assertThat(register(squatted, new DefaultHttpHeaders())).startsWith("200 ");

            long until = System.nanoTime() + WAIT.toNanos();
            while (!registry.live(Role.DECODE).isEmpty() && System.nanoTime() < until) {
                Thread.sleep(10);
            }

            assertThat(registry.live(Role.DECODE)).isEmpty();
            assertThat(registry.impostors()).isEqualTo(1);
        } finally {
            real.disposeNow();
        }
    }

    @Test
    void aNewerIncarnationAtTheSameAddressesIsARestartAndAnOlderOneIsRefused() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30), VirtualTimeScheduler.create(), 64);
        Instance decode = new Instance(Role.DECODE, Instance.address("127.0.0.1:8200"), Instance.address("127.0.0.1:8201"));

        assertThat(registry.ping(decode, Long.MIN_VALUE, 100)).isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        assertThat(registry.ping(decode, Long.MIN_VALUE, 200)).as("restarted").isEqualTo(InstanceRegistry.Outcome.REFRESHED);
        assertThat(registry.ping(decode, Long.MIN_VALUE, 100)).as("its previous life")
                .isEqualTo(InstanceRegistry.Outcome.REPLAYED);
        assertThat(registry.live(Role.DECODE)).containsExactly(decode);
    }

    @Test
    void aFullRoleTakesANewInstanceOnceALiveOneStopsPinging() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10), clock, 1);
        Instance first = new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", 1), new InetSocketAddress("127.0.0.1", 2));
        Instance second = new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", 3), new InetSocketAddress("127.0.0.1", 4));
        Instance prefill = new Instance(Role.PREFILL, new InetSocketAddress("127.0.0.1", 5), new InetSocketAddress("127.0.0.1", 6));

        assertThat(registry.ping(first)).isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        assertThat(registry.ping(second)).isEqualTo(InstanceRegistry.Outcome.FULL);
        assertThat(registry.ping(prefill)).as("the cap is per role").isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        clock.advanceTimeBy(Duration.ofSeconds(11));

        assertThat(registry.ping(second)).isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        assertThat(registry.live(Role.DECODE)).containsExactly(second);
    }

    @Test
    void aRegistrationBodyOverFourKibibytesIsRefusedUnread() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry).bindNow();
        String padded = DECODE.replace("}", ", \"pad\": \"" + "x".repeat(DiscoveryRoutes.MAX_REGISTRATION_BYTES) + "\"}");

        assertThat(register(padded, new DefaultHttpHeaders())).startsWith("413 ").contains("4 KiB limit");
        assertThat(registry.live(Role.DECODE)).isEmpty();
    }

    @Test
    void aRegistrationWhoseHostIsNotAHostNameIsRefusedWithoutEchoingIt() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        proxy = ProxyServer.builder().discoveryPort(0).registry(registry).bindNow();
        String forged = "{\"role\": \"decode\", \"http\": \"evil\\n12:00:00 INFO registered decode:8200\","
                + " \"notify\": \"127.0.0.1:8201\"}";

        String answer = register(forged, new DefaultHttpHeaders());

        assertThat(answer).startsWith("400 ").contains("is not host:port with a host name or IP address");
        assertThat(HttpJson.object(answer.substring(4)).at("/error/message").asText())
                .as("the line break is escaped").contains("evil\\n12:00:00").doesNotContain("\n");
        assertThat(registry.live(Role.DECODE)).isEmpty();
        assertThat(Instance.address("[::1]:8200").getPort()).isEqualTo(8200);
        assertThat(Instance.address("decode-0.cluster.local:8200").getHostString()).isEqualTo("decode-0.cluster.local");
    }

    @Test
    void refusalsOfAFullRoleAreLoggedAtMostOncePerTenSecondsWithTheirCount() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        InstanceRegistry registry = new InstanceRegistry(Duration.ofMinutes(10), clock, 1);
        ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory
                .getLogger(InstanceRegistry.class);
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> lines =
                new ch.qos.logback.core.read.ListAppender<>();
        lines.start();
        logger.addAppender(lines);
        try {
            registry.ping(new Instance(Role.DECODE, new InetSocketAddress("127.0.0.1", 1), new InetSocketAddress("127.0.0.1", 2)));
            for (int i = 0; i < 5_000; i++) {
                registry.ping(new Instance(Role.DECODE, new InetSocketAddress("10.0.0.1", 1000 + i),
                        new InetSocketAddress("10.0.0.1", 1)));
                if (i == 2_500) {
                    clock.advanceTimeBy(Duration.ofSeconds(10));
                }
            }
        } finally {
            logger.detachAppender(lines);
        }

        java.util.List<String> refusals = lines.list.stream().map(ch.qos.logback.classic.spi.ILoggingEvent::getFormattedMessage)
                .filter(m -> m.startsWith("refused")).toList();
        assertThat(refusals).hasSize(2);
        assertThat(refusals.get(0)).startsWith("refused 1 new instance(s)");
        assertThat(refusals.get(1)).startsWith("refused 2501 new instance(s)").contains("(2502 refused in all");
        assertThat(registry.refusedFull()).isEqualTo(5_000);
    }
}
