package dev.kvflux.pipeline.serve;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** Prefill's start-up. */
class PrefillServerTest {

    @Test
    void prefillThatFailsToStartReleasesItsNotifyPort() throws IOException {
        int notifyPort;
        try (ServerSocket probe = new ServerSocket(0)) {
            notifyPort = probe.getLocalPort();
        }
        SimulatedXgmiEngine closed = SimulatedXgmiEngine.create();
        closed.close();

        assertThatThrownBy(() -> PrefillServer.start(new RoleAddresses("127.0.0.1", 0, notifyPort),
                ServingModel.DEEPSEEK_V2_LITE_MI355X, Policy.KVFLUX, closed, Duration.ofSeconds(1), Duration.ofSeconds(1)))
                .isInstanceOf(IllegalStateException.class);

        assertThatCode(() -> new ServerSocket(notifyPort, 50, java.net.InetAddress.getLoopbackAddress()).close())
                .as("the notify port is free again").doesNotThrowAnyException();
    }

    @Test
    void startOnANonBlockingThreadFailsFastWithoutBindingTheNotifyPort() throws IOException {
        int notifyPort = freePort();
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            assertThatThrownBy(() -> Mono.fromCallable(() -> PrefillServer.start(
                            new RoleAddresses("127.0.0.1", 0, notifyPort), ServingModel.DEEPSEEK_V2_LITE_MI355X,
                            Policy.KVFLUX, engine, Duration.ofSeconds(1), Duration.ofSeconds(1)))
                    .subscribeOn(Schedulers.parallel()).block(Duration.ofSeconds(10)))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("PrefillServer.start").hasMessageContaining("boundedElastic");
        }

        assertThatCode(() -> new ServerSocket(notifyPort, 50, java.net.InetAddress.getLoopbackAddress()).close())
                .as("nothing was bound").doesNotThrowAnyException();
    }

    static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }
}
