package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.test.scheduler.VirtualTimeScheduler;

/** The registration schedule, on virtual time. */
class InstancePingerTest {

    @Test
    void pingsThatHangKeepBeingRetriedForAsLongAsTheInstanceRuns() {
        VirtualTimeScheduler clock = VirtualTimeScheduler.create();
        AtomicInteger started = new AtomicInteger();
        List<String> problems = new CopyOnWriteArrayList<>();
        List<Throwable> errors = new CopyOnWriteArrayList<>();
        // the proxy's host drops connection attempts: every ping would take 30 s to fail, ten intervals
        Disposable pings = InstancePinger.schedule(Duration.ofSeconds(3), clock, () -> {
            started.incrementAndGet();
            return Mono.delay(Duration.ofSeconds(30), clock).thenReturn("connect timed out");
        }).subscribe(problems::add, errors::add);

        clock.advanceTimeBy(Duration.ofMinutes(10));
        pings.dispose();

        assertThat(errors).as("the schedule never ends on its own").isEmpty();
        assertThat(started.get()).as("one ping per interval, at 0 s to 600 s").isEqualTo(201);
        assertThat(problems).hasSize(200).allSatisfy(p -> assertThat(p).contains("Timeout"));
    }

    @Test
    void pingsSignedWithTheClusterSecretRegisterWithAProxyThatRequiresThem() {
        NotifyAuth secret = NotifyAuth.of("pinger-test-secret-0123456789");
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        Instance self = new Instance(Role.PREFILL, Instance.address("127.0.0.1:8100"), Instance.address("127.0.0.1:8101"));
        try (ProxyServer proxy = ProxyServer.builder().discoveryPort(0).registry(registry).registrationSecret(secret)
                .bindNow()) {
            String url = "http://127.0.0.1:" + proxy.discoveryAddress().getPort();
            InstancePinger unsigned = InstancePinger.start(url, self, Duration.ofMillis(100), null);
            InstancePinger signed;
            try {
                Mono.delay(Duration.ofMillis(500)).block();
                assertThat(registry.live(Role.PREFILL)).as("unsigned pings are refused").isEmpty();
            } finally {
                unsigned.dispose();
            }
            signed = InstancePinger.start(url, self, Duration.ofMillis(100), secret);
            try {
                Mono.fromCallable(() -> registry.live(Role.PREFILL)).filter(live -> !live.isEmpty())
                        .repeatWhenEmpty(ticks -> ticks.delayElements(Duration.ofMillis(20))).block(Duration.ofSeconds(10));
                assertThat(registry.live(Role.PREFILL)).containsExactly(self);
            } finally {
                signed.dispose();
            }
        }
    }
}
