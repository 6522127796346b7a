package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.transfer.Incarnation;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/** Incarnations: a decode restart fails what targeted its previous life; stale messages are rejected. */
class IncarnationTest {
    private static final ServingModel FAST = new ServingModel("fast", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).as(what).isTrue();
    }

    /** Whether a block list for {@code transferId} arrived; a resent one (its acknowledgement was late) counts once. */
    private static boolean blockListsFor(List<NotifyMessage> received, String transferId) {
        return received.stream().anyMatch(m -> m instanceof NotifyMessage.RemoteBlocks b && b.transferId().equals(transferId));
    }

    private static String body(String id, int notifyPort) {
        return "{\"prompt\": \"a b\", \"kv_transfer_params\": {\"transfer_id\": \"" + id
                + "\", \"remote_notify\": \"127.0.0.1:" + notifyPort + "\"}}";
    }

    private static long later(long incarnation) throws InterruptedException {
        long next;
        do {
            Thread.sleep(2);
            next = Incarnation.next();
        } while (Incarnation.startMillis(next) <= Incarnation.startMillis(incarnation));
        return next;
    }

    @Test
    void aRestartedDecodesNewIncarnationFailsEverythingAimedAtTheOldOneAtOnceAndOldBlockListsAreRejected()
            throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = NotifyServer.builder().handler(toDecode::add).bind().block(Duration.ofSeconds(5));
             NotifyClient asDecode = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = PrefillServer.builder().model(FAST).engine(engine)
                     .notifyWithin(Duration.ofSeconds(2)).maxQueuedPrompts(16).kvBlocks(1000).bindNow()) {
            int port = decode.address().getPort();
            long old = Incarnation.next();
            // t-0 completes against the old incarnation: prefill now knows it
            asDecode.send(prefill.notifyAddress(), DescribedDecode.blocks(FAST, "t-0", List.of(1L), old),
                    Duration.ofSeconds(5)).block();
            assertThat(Completions.post(prefill.httpAddress(), body("t-0", port)).block(Duration.ofSeconds(5)))
                    .startsWith("200 ");
            await("write_done names the old incarnation's blocks", () -> toDecode.stream().anyMatch(
                    m -> m instanceof NotifyMessage.WriteDone d && d.toIncarnation() == old
                            && d.incarnation() == prefill.incarnation()));
            // t-1 came before the restart; its block list never will
            assertThat(Completions.post(prefill.httpAddress(), body("t-1", port)).block(Duration.ofSeconds(5)))
                    .startsWith("200 ");
            await("t-1 waits for its block list", () -> prefill.transfersRunning() == 1);

            long current = later(old);
            asDecode.send(prefill.notifyAddress(), DescribedDecode.blocks(FAST, "t-2", List.of(2L), current),
                    Duration.ofSeconds(5)).block();
            assertThat(Completions.post(prefill.httpAddress(), body("t-2", port)).block(Duration.ofSeconds(5)))
                    .startsWith("200 ");

            await("t-1 is failed at once", () -> prefill.stats().failedOnDecodeRestart() == 1);
            await("no transfer is left running", () -> prefill.transfersRunning() == 0);
            assertThat(prefill.writesInFlight()).isZero();
            await("no transfer holds blocks", () -> prefill.blocks().owners() == 0);
            assertThat(toDecode).as("the new incarnation is not sent release for the old one's transfer")
                    .noneMatch(m -> m instanceof NotifyMessage.Release && m.transferId().equals("t-1"));

            asDecode.send(prefill.notifyAddress(), DescribedDecode.blocks(FAST, "t-3", List.of(3L), old),
                    Duration.ofSeconds(5)).block();
            String stale = Completions.post(prefill.httpAddress(), body("t-3", port)).block(Duration.ofSeconds(5));

            assertThat(stale).startsWith("409 ").contains("previous incarnation");
            assertThat(prefill.stats().staleIncarnation()).isEqualTo(1);
            assertThat(toDecode).noneMatch(m -> m instanceof NotifyMessage.WriteDone && m.transferId().equals("t-3"));
        }
    }

    @Test
    void decodeRejectsAndCountsANoticeMeantForItsPreviousIncarnation() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = NotifyServer.builder().handler(toPrefill::add).bind().block(Duration.ofSeconds(5));
             NotifyClient asPrefill = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30)).bindNow()) {
            var answer = Completions.post(decode.httpAddress(), body("t-1", prefill.address().getPort())).toFuture();
            await("decode sent its block list with its incarnation", () -> toPrefill.stream().anyMatch(
                    m -> m instanceof NotifyMessage.RemoteBlocks b && b.incarnation() == decode.incarnation()));

            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-1", 9, decode.incarnation() - 1, 0),
                    Duration.ofSeconds(5)).block();
            Thread.sleep(50);
            assertThat(answer).as("the stale notice settles nothing").isNotDone();

            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-1", 9, decode.incarnation(), 0),
                    Duration.ofSeconds(5)).block();
            assertThat(answer.get(5, TimeUnit.SECONDS)).startsWith("200 ");
            assertThat(Completions.metrics(decode.httpAddress()).count("kvflux_notify_messages_stale_total")).isEqualTo(1);
        }
    }

    @Test
    void aRestartedPrefillsNewIncarnationFailsTheRequestsWaitingForItsPreviousLifeAtOnce() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = NotifyServer.builder().handler(toPrefill::add).bind().block(Duration.ofSeconds(5));
             NotifyClient asPrefill = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30)).bindNow()) {
            int port = prefill.address().getPort();
            long old = Incarnation.next();
            var first = Completions.post(decode.httpAddress(), body("t-0", port)).toFuture();
            var waiting = Completions.post(decode.httpAddress(), body("t-1", port)).toFuture();
            await("both block lists went out", () -> blockListsFor(toPrefill, "t-0") && blockListsFor(toPrefill, "t-1"));
            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-0", old, decode.incarnation(), 0),
                    Duration.ofSeconds(5)).block();
            assertThat(first.get(5, TimeUnit.SECONDS)).startsWith("200 ");

            long current = later(old);
            var after = Completions.post(decode.httpAddress(), body("t-2", port)).toFuture();
            await("t-2's block list went out", () -> blockListsFor(toPrefill, "t-2"));
            asPrefill.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-2", current, decode.incarnation(), 0),
                    Duration.ofSeconds(5)).block();

            assertThat(waiting.get(5, TimeUnit.SECONDS)).startsWith("503 ").contains("prefill_restarted");
            assertThat(after.get(5, TimeUnit.SECONDS)).startsWith("200 ");

            assertThat(Completions.metrics(decode.httpAddress()).count("kvflux_decode_requests_failed_peer_restart_total"))
                    .isEqualTo(1);
        }
    }
}
