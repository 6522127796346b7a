package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Instances a membership store holds outlive the ping TTL until removed, under the same cap and rules as pings. */
class InstanceRegistryTest {
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();

    private static Instance decode(int port) {
        return new Instance(Role.DECODE, Instance.address("127.0.0.1:" + port), Instance.address("127.0.0.1:" + (port + 1)));
    }

    @Test
    void aHeldInstanceOutlivesThePingTtlUntilItIsRemoved() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10), clock, 8);
        registry.hold(decode(8200), Long.MIN_VALUE, 1);
        registry.ping(decode(8300));

        clock.advanceTimeBy(Duration.ofMinutes(5));

        assertThat(registry.live(Role.DECODE)).containsExactly(decode(8200));
        assertThat(registry.held(decode(8200))).isTrue();
        assertThat(registry.remove(decode(8200))).isTrue();
        assertThat(registry.live(Role.DECODE)).isEmpty();
        assertThat(registry.remove(decode(8200))).isFalse();
    }

    @Test
    void aPingedInstanceThatIsThenHeldStaysHeldAndAHeldOneThatPingsStaysHeld() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10), clock, 8);
        registry.ping(decode(8200), Long.MIN_VALUE, 1);
        registry.hold(decode(8200), Long.MIN_VALUE, 1);
        registry.ping(decode(8200), Long.MIN_VALUE, 1);

        clock.advanceTimeBy(Duration.ofMinutes(1));

        assertThat(registry.live(Role.DECODE)).containsExactly(decode(8200));
    }

    @Test
    void heldInstancesCountAgainstTheCapAndFollowTheReplayAndClaimRules() {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(10), clock, 2);

        assertThat(registry.hold(decode(8200), 1_000, 5)).isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        assertThat(registry.hold(decode(8300), 1_000, 5)).isEqualTo(InstanceRegistry.Outcome.REGISTERED);
        assertThat(registry.hold(decode(8400), 1_000, 5)).isEqualTo(InstanceRegistry.Outcome.FULL);
        assertThat(registry.hold(decode(8200), 1_000, 5)).as("no newer signature").isEqualTo(InstanceRegistry.Outcome.REPLAYED);
        assertThat(registry.hold(decode(8200), 2_000, 4)).as("an older incarnation").isEqualTo(InstanceRegistry.Outcome.REPLAYED);
        assertThat(registry.hold(decode(8200), 2_000, 6)).as("a restart").isEqualTo(InstanceRegistry.Outcome.REFRESHED);
        Instance claiming = new Instance(Role.PREFILL, Instance.address("127.0.0.1:8200"), Instance.address("127.0.0.1:9"));
        assertThat(registry.hold(claiming, 3_000, 1)).isEqualTo(InstanceRegistry.Outcome.CLAIMED);
    }
}
