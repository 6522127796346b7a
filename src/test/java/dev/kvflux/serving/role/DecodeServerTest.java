package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** A decode instance on its own, with requests sent to it directly. */
class DecodeServerTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);


    @Test
    void transferIdAlreadyInUseIsRefusedWith409() throws InterruptedException {
        CountDownLatch firstIsWaiting = new CountDownLatch(1);
        try (NotifyServer prefill = NotifyServer.builder().handler(message -> firstIsWaiting.countDown()).bind()
                     .block(Duration.ofSeconds(5));
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(30))
                     .bindNow()) {
            String request = "{\"prompt\": \"a b\", \"kv_transfer_params\": {\"transfer_id\": \"t-1\","
                    + " \"remote_notify\": \"127.0.0.1:" + prefill.address().getPort() + "\"}}";
            Disposable first = Completions.post(decode.httpAddress(), request).subscribe();
            // decode sends remote_blocks only once the transfer is registered
            assertThat(firstIsWaiting.await(5, TimeUnit.SECONDS)).isTrue();

            String second = Completions.post(decode.httpAddress(), request).block(Duration.ofSeconds(5));

            first.dispose();
            assertThat(second).startsWith("409 ").contains("duplicate_transfer_id").contains("own transfer id");
        }
    }

    @Test
    void startOnANonBlockingThreadFailsFastWithoutBindingTheNotifyPort() throws Exception {
        int notifyPort = PrefillServerTest.freePort();

        assertThatThrownBy(() -> Mono.fromCallable(() -> DecodeServer.builder()
                .addresses(new RoleAddresses("127.0.0.1", 0, notifyPort)).model(SMALL)
                .receiveDeadline(Duration.ofSeconds(30)).bindNow())
                .subscribeOn(Schedulers.parallel()).block(Duration.ofSeconds(10)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("DecodeServer.bindNow").hasMessageContaining("boundedElastic");
        assertThatCode(() -> new java.net.ServerSocket(notifyPort, 50, java.net.InetAddress.getLoopbackAddress()).close())
                .as("nothing was bound").doesNotThrowAnyException();
    }

    @Test
    void withADeadlineUndeliverableRemoteBlocksFailTheRequestAtOnceWith503() throws Exception {
        int closedNotifyPort = PrefillServerTest.freePort();
        // remote_blocks is retried for half the deadline (1 s); the deadline itself would answer 504 at 2 s
        try (DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(2)).bindNow()) {
            String answer = Completions.post(decode.httpAddress(), "{\"prompt\": \"a b\", \"kv_transfer_params\": {\"transfer_id\": \"t-1\","
                    + " \"remote_notify\": \"127.0.0.1:" + closedNotifyPort + "\"}}").block(Duration.ofSeconds(5));

            assertThat(answer).startsWith("503 ").contains("REMOTE_BLOCKS_UNDELIVERABLE")
                    .contains("127.0.0.1:" + closedNotifyPort);
            assertThat(decode.notifyMeters().count(NotifyEvent.UNDELIVERABLE)).isEqualTo(1);
        }
    }
}
