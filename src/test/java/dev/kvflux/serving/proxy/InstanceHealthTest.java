package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Which instances earn traffic: ejection on failures in a row, return on a passed health check. */
class InstanceHealthTest {
    private static final Instance DECODE = new Instance(Role.DECODE, Instance.address("127.0.0.1:8200"),
            Instance.address("127.0.0.1:8201"));
    private final AtomicLong now = new AtomicLong();
    private final InstanceHealth health = new InstanceHealth(2, 3, Duration.ofSeconds(5), now::get);

    @Test
    void twoFailedHealthChecksInARowEjectAndOnePassedCheckRestores() {
        health.probed(DECODE, false);
        assertThat(health.usable(DECODE)).as("one failure is not a pattern").isTrue();
        health.probed(DECODE, false);
        assertThat(health.usable(DECODE)).isFalse();
        assertThat(health.ejected()).isEqualTo(1);

        health.probed(DECODE, true);
        assertThat(health.usable(DECODE)).isTrue();
        assertThat(health.ejections()).isEqualTo(1);
    }

    @Test
    void aSuccessBetweenFailuresResetsTheCount() {
        health.probed(DECODE, false);
        health.probed(DECODE, true);
        health.probed(DECODE, false);
        assertThat(health.usable(DECODE)).isTrue();
    }

    @Test
    void failedRequestsInARowEjectUntilTheCooldownHasPassedAndAHealthCheckSucceeds() {
        for (int i = 0; i < 3; i++) {
            health.requested(DECODE, false);
        }
        assertThat(health.usable(DECODE)).isFalse();

        health.probed(DECODE, true);
        assertThat(health.usable(DECODE)).as("a passed check within the cooldown does not restore it").isFalse();
        now.addAndGet(Duration.ofSeconds(5).toNanos());
        health.probed(DECODE, true);
        assertThat(health.usable(DECODE)).isTrue();
    }

    @Test
    void anAnsweredRequestResetsTheRequestFailures() {
        health.requested(DECODE, false);
        health.requested(DECODE, false);
        health.requested(DECODE, true);
        health.requested(DECODE, false);
        assertThat(health.usable(DECODE)).isTrue();
    }

    @Test
    void whenEveryInstanceOfARoleIsEjectedTheRegistryStillPicksOne() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        registry.ping(DECODE);
        health.probed(DECODE, false);
        health.probed(DECODE, false);

        assertThat(registry.pick(Role.DECODE, health::usable)).contains(DECODE);
    }
}
