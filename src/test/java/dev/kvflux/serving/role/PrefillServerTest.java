package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
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

        assertThatThrownBy(() -> PrefillServer.builder().addresses(new RoleAddresses("127.0.0.1", 0, notifyPort))
                .model(ServingModel.DEEPSEEK_V2_LITE_MI355X).engine(closed).transferTimeout(Duration.ofSeconds(1))
                .notifyWithin(Duration.ofSeconds(1)).bindNow())
                .isInstanceOf(IllegalStateException.class);

        assertThatCode(() -> new ServerSocket(notifyPort, 50, java.net.InetAddress.getLoopbackAddress()).close())
                .as("the notify port is free again").doesNotThrowAnyException();
    }

    @Test
    void startOnANonBlockingThreadFailsFastWithoutBindingTheNotifyPort() throws IOException {
        int notifyPort = freePort();
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            assertThatThrownBy(() -> Mono.fromCallable(() -> PrefillServer.builder()
                    .addresses(new RoleAddresses("127.0.0.1", 0, notifyPort))
                    .model(ServingModel.DEEPSEEK_V2_LITE_MI355X).engine(engine).transferTimeout(Duration.ofSeconds(1))
                    .notifyWithin(Duration.ofSeconds(1)).bindNow())
                    .subscribeOn(Schedulers.parallel()).block(Duration.ofSeconds(10)))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("PrefillServer.bindNow").hasMessageContaining("boundedElastic");
        }

        assertThatCode(() -> new ServerSocket(notifyPort, 50, java.net.InetAddress.getLoopbackAddress()).close())
                .as("nothing was bound").doesNotThrowAnyException();
    }

    @Test
    void builderWithoutAModelOrAnEngineSaysWhatIsMissingAndBindsNothing() {
        assertThatThrownBy(() -> PrefillServer.builder().model(ServingModel.DEEPSEEK_V2_LITE_MI355X).bindNow())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("a model and an engine");
        assertThatThrownBy(() -> DecodeServer.builder().receiveDeadline(Duration.ofSeconds(1)).bindNow())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("needs a model");
    }

    @Test
    void builderSettersRefuseValuesOutOfRangeAtOnce() {
        assertThatThrownBy(() -> PrefillServer.builder().maxQueuedPrompts(0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxQueuedPrompts");
        assertThatThrownBy(() -> PrefillServer.builder().kvBlocks(0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kv-blocks");
        assertThatThrownBy(() -> PrefillServer.builder().notifyWithin(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("notifyWithin");
        assertThatThrownBy(() -> DecodeServer.builder().blockLease(Duration.ofSeconds(-1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("block lease");
        assertThatThrownBy(() -> DecodeServer.builder().receiveDeadline(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("receive deadline");
    }

    static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    @Test
    void completionBeyondTheQueueBoundIsRefusedWith503AndCounted() throws Exception {
        // 4 tokens per step at 10 tokens/s: the first 100-token prompt waits for its last step for 10 s
        ServingModel slow = new ServingModel("slow", 10, 4, 2, Duration.ofMillis(5), 16, 64);
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = PrefillServer.builder().model(slow).engine(engine)
                     .notifyWithin(Duration.ofSeconds(1)).maxQueuedPrompts(1).bindNow()) {
            String body = "{\"prompt\": \"" + "w ".repeat(100).trim() + "\", \"kv_transfer_params\": {"
                    + "\"transfer_id\": \"t-%s\", \"remote_notify\": \"127.0.0.1:9\"}}";
            Disposable first = Completions.post(prefill.httpAddress(), body.formatted(1)).subscribe();
            for (int i = 0; i < 500 && prefill.stats().requests() == 0; i++) {
                Thread.sleep(10);
            }

            String second = Completions.post(prefill.httpAddress(), body.formatted(2)).block(Duration.ofSeconds(5));

            first.dispose();
            assertThat(second).startsWith("503 ").contains("prefill_queue_full").contains("overloaded")
                    .contains("lower the request rate or concurrency");
            assertThat(prefill.stats().refusedQueueFull()).isEqualTo(1);
            assertThat(prefill.stats().requests()).isEqualTo(1);
        }
    }

}
