package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** A bad duration is echoed as the user writes one (0s, 5ms), not as Java's PT0S. */
class DurationMessagesTest {

    @Test
    void theProxysTimeoutsAndTheRegistrysTtlSayTheBadValueAsWritten() {
        assertThatIllegalArgumentException().isThrownBy(() -> ProxyServer.builder().upstreamTimeout(Duration.ZERO))
                .withMessage("upstream timeout must be positive, got 0s");
        assertThatIllegalArgumentException().isThrownBy(() -> ProxyServer.builder().firstByteTimeout(Duration.ZERO))
                .withMessageEndingWith("got 0s");
        assertThatIllegalArgumentException()
                .isThrownBy(() -> ProxyServer.builder().healthChecks(Duration.ofMillis(5), InstanceHealth.defaults()))
                .withMessage("health-check interval must be at least 10ms, got 5ms");
        assertThatIllegalArgumentException().isThrownBy(() -> new InstanceRegistry(Duration.ZERO))
                .withMessage("instance time-to-live must be positive, got 0s");
    }
}
