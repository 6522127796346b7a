package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.transfer.BlockAllocator.State;
import dev.kvflux.transfer.notify.NotifyClient;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyServer;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * Every way a transfer can stop being wanted reaches the role that works on it, and every block is
 * given back: prefill and decode on their own, each facing a fake peer (a bare notify server that records
 * what it is sent). Waits are for events, never for a time.
 */
class FailureHandlingTest {
    /** 4 tokens per step at 10 tokens/s: a 100-token prompt keeps prefill busy for 10 s. */
    private static final ServingModel SLOW = new ServingModel("slow", 10, 4, 2, Duration.ofMillis(5), 16, 64);
    private static final ServingModel FAST = new ServingModel("fast", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final String LONG_PROMPT = "w ".repeat(100).trim();

    private static String body(String id, String prompt, InetSocketAddress peerNotify) {
        return "{\"prompt\": \"" + prompt + "\", \"max_tokens\": 2, \"kv_transfer_params\": {\"transfer_id\": \"" + id
                + "\", \"remote_notify\": \"127.0.0.1:" + peerNotify.getPort() + "\"}}";
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).as(what).isTrue();
    }

    private static NotifyServer recorder(List<NotifyMessage> into) {
        return NotifyServer.builder().handler(into::add).bind().block(Duration.ofSeconds(5));
    }

    private static boolean got(List<NotifyMessage> messages, Class<? extends NotifyMessage> type, String id) {
        return messages.stream().anyMatch(m -> type.isInstance(m) && m.transferId().equals(id));
    }

    private static PrefillServer prefill(ServingModel model, SimulatedXgmiEngine engine, int kvBlocks) {
        return PrefillServer.builder().model(model).engine(engine).notifyWithin(Duration.ofSeconds(2))
                .maxQueuedPrompts(16).kvBlocks(kvBlocks).bindNow();
    }

    @Test
    void aCancelledPrefillRequestTakesItsPromptOutOfTheQueueFreesItsBlocksAndReleasesDecode() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = recorder(toDecode);
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(SLOW, engine, 1000)) {
            Disposable first = Completions.post(prefill.httpAddress(), body("t-1", LONG_PROMPT, decode.address()))
                    .subscribe();
            Disposable second = Completions.post(prefill.httpAddress(), body("t-2", LONG_PROMPT, decode.address()))
                    .subscribe();
            await("both prompts are queued", () -> prefill.stats().requests() == 2);

            second.dispose();

            await("the cancelled prompt is aborted", () -> prefill.stats().aborted() == 1);
            await("decode is sent release for it", () -> got(toDecode, NotifyMessage.Release.class, "t-2"));
            assertThat(prefill.blocks().owners()).as("only the first prompt holds blocks").isEqualTo(1);
            first.dispose();
            await("all blocks free", () -> prefill.blocks().blocks().get(State.FREE) == 1000);
        }
    }

    @Test
    void decodesAbortAnswersTheQueuedPromptAtOnceAndNothingIsWritten() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = recorder(toDecode);
             NotifyClient client = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(SLOW, engine, 1000)) {
            Disposable first = Completions.post(prefill.httpAddress(), body("t-1", LONG_PROMPT, decode.address()))
                    .subscribe();
            var second = Completions.post(prefill.httpAddress(), body("t-2", LONG_PROMPT, decode.address())).toFuture();
            await("both prompts are queued", () -> prefill.stats().requests() == 2);

            client.send(prefill.notifyAddress(), new NotifyMessage.Abort("t-2", "decode's receive deadline passed"),
                    Duration.ofSeconds(5)).block();

            assertThat(second.get(5, java.util.concurrent.TimeUnit.SECONDS)).startsWith("409 ")
                    .contains("transfer_aborted").contains("decode's receive deadline passed");
            await("decode is sent release", () -> got(toDecode, NotifyMessage.Release.class, "t-2"));
            assertThat(engine.batchesPosted()).isZero();
            first.dispose();
        }
    }

    @Test
    void anAbortDuringTheWriteStopsItFreesItsPlaceAndReleasesDecodeOnceNothingIsInFlight() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = recorder(toDecode);
             NotifyClient client = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(FAST, engine, 1000)) {
            // decode never sends its block list: the write waits for it, and holds no place of the pipeline meanwhile
            String answer = Completions.post(prefill.httpAddress(), body("t-1", "a b c", decode.address()))
                    .block(Duration.ofSeconds(5));
            assertThat(answer).startsWith("200 ");
            await("the transfer waits for its block list", () -> prefill.transfersRunning() == 1);
            assertThat(prefill.writesInFlight()).as("a write without its block list takes no place").isZero();

            client.send(prefill.notifyAddress(), new NotifyMessage.Abort("t-1", "the client went away"),
                    Duration.ofSeconds(5)).block();

            await("the transfer has ended", () -> prefill.transfersRunning() == 0);
            await("decode is sent release", () -> got(toDecode, NotifyMessage.Release.class, "t-1"));
            assertThat(toDecode).as("no outcome for an aborted transfer").noneMatch(
                    m -> m instanceof NotifyMessage.WriteDone || m instanceof NotifyMessage.WriteFailed);
            assertThat(prefill.blocks().owners()).isZero();
            assertThat(prefill.stats().aborted()).isEqualTo(1);
        }
    }

    @Test
    void aTransferAbortedBeforeItsRequestCameIsRefusedAndNeverQueued() throws Exception {
        try (NotifyClient client = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(FAST, engine, 1000)) {
            client.send(prefill.notifyAddress(), new NotifyMessage.Abort("t-1", "the client went away"),
                    Duration.ofSeconds(5)).block();

            String answer = Completions.post(prefill.httpAddress(), body("t-1", "a b", new InetSocketAddress(9)))
                    .block(Duration.ofSeconds(5));

            assertThat(answer).startsWith("409 ").contains("transfer_fenced").contains("was aborted");
            assertThat(prefill.stats().requests()).isZero();
            assertThat(prefill.stats().abortsForUnknown()).isEqualTo(1);
            assertThat(prefill.blocks().owners()).isZero();
        }
    }

    @Test
    void aPromptNeedingMoreBlocksThanAreFreeIsRefusedAtOnceWith503AndAReason() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = recorder(toDecode);
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(FAST, engine, 4)) {
            // 100 tokens in 16-token blocks: 7 blocks, 4 exist
            String answer = Completions.post(prefill.httpAddress(), body("t-1", LONG_PROMPT, decode.address()))
                    .block(Duration.ofSeconds(5));

            assertThat(answer).startsWith("503 ").contains("kv_blocks_exhausted").contains("needs 7 blocks, more than the 4 it has in all");
            assertThat(prefill.stats().refusedOutOfBlocks()).isEqualTo(1);
            await("decode may free its blocks at once", () -> got(toDecode, NotifyMessage.Release.class, "t-1"));
        }
    }

    /**
     * Decode's receive deadline in the tests that run into it. Decode gives the block list to prefill half of it; on a
     * loaded host a fresh notify connection took longer than 150 ms, and a 300 ms deadline ended the request at its
     * block list (503) instead of its deadline (504).
     */
    private static final Duration DEADLINE = Duration.ofSeconds(2);

    @Test
    void decodesDeadlineAnswers504TellsPrefillAbortAndQuarantinesTheBlocksUntilRelease() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             NotifyClient client = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(DEADLINE)
                     .kvBlocks(100).blockLease(Duration.ofMinutes(10)).bindNow()) {
            String answer = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address()))
                    .block(Duration.ofSeconds(15));

            assertThat(answer).startsWith("504 ").contains("RECEIVE_DEADLINE");
            await("prefill is told abort", () -> got(toPrefill, NotifyMessage.Abort.class, "t-1"));
            assertThat(toPrefill.stream().filter(m -> m instanceof NotifyMessage.Abort).findFirst().orElseThrow())
                    .asString().contains("receive deadline");
            assertThat(decode.blocks().blocks().get(State.QUARANTINED)).isEqualTo(1);

            client.send(decode.notifyAddress(), new NotifyMessage.Release("t-1"), Duration.ofSeconds(5)).block();

            await("the blocks are free after prefill's release", () -> decode.blocks().blocks().get(State.FREE) == 100);
        }
    }

    @Test
    void aReleaseThatCameBeforeItsRequestFreesTheRequestsBlocksWhenItEndsInsteadOfAtTheLease() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             NotifyClient client = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(DEADLINE)
                     .kvBlocks(100).blockLease(Duration.ofMinutes(10)).bindNow()) {
            client.send(decode.notifyAddress(), new NotifyMessage.Release("t-1"), Duration.ofSeconds(5)).block();

            String answer = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address()))
                    .block(Duration.ofSeconds(15));

            assertThat(answer).startsWith("504 ");
            await("the blocks are free without waiting for the lease",
                    () -> decode.blocks().blocks().get(State.FREE) == 100);
            assertThat(decode.blocks().blocks().get(State.QUARANTINED)).isZero();
        }
    }

    @Test
    void writeFailedAnswersTheClientAtOnceWhileTheBlocksWaitForRelease() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             NotifyClient client = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30))
                     .kvBlocks(100).blockLease(Duration.ofMinutes(10)).bindNow()) {
            var answer = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address())).toFuture();
            await("decode sent its block list", () -> got(toPrefill, NotifyMessage.RemoteBlocks.class, "t-1"));

            client.send(decode.notifyAddress(), new NotifyMessage.WriteFailed("t-1", StatusCode.ERR_RDMA_OP,
                    "link down"), Duration.ofSeconds(5)).block();

            assertThat(answer.get(5, java.util.concurrent.TimeUnit.SECONDS)).startsWith("503 ").contains("link down");
            assertThat(decode.blocks().blocks().get(State.QUARANTINED)).isEqualTo(1);
            assertThat(toPrefill).as("prefill already knows: no abort").noneMatch(m -> m instanceof NotifyMessage.Abort);

            client.send(decode.notifyAddress(), new NotifyMessage.Release("t-1"), Duration.ofSeconds(5)).block();
            await("free after release", () -> decode.blocks().blocks().get(State.FREE) == 100);
        }
    }

    @Test
    void blocksPrefillNeverReleasesAreReclaimedWhenTheLeasePasses() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofMillis(100))
                     .kvBlocks(100).blockLease(Duration.ofMillis(200)).bindNow()) {
            String answer = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address()))
                    .block(Duration.ofSeconds(5));
            assertThat(answer).startsWith("504 ");

            await("the lease reclaims the blocks", () -> decode.blocks().leaseExpired() == 1);
            assertThat(decode.blocks().blocks().get(State.FREE)).isEqualTo(100);
        }
    }

    @Test
    void decodesShutdownFailsWaitingRequestsWithAReasonAndTellsPrefillAbort() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill)) {
            DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30)).bindNow();
            var answer = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address())).toFuture();
            await("decode sent its block list", () -> got(toPrefill, NotifyMessage.RemoteBlocks.class, "t-1"));

            decode.close();

            assertThat(answer.get(5, java.util.concurrent.TimeUnit.SECONDS)).startsWith("503 ")
                    .contains("decode_shutting_down");
            assertThat(toPrefill).anyMatch(m -> m instanceof NotifyMessage.Abort a && a.transferId().equals("t-1")
                    && a.reason().contains("shutting down"));
        }
    }

    @Test
    void decodeOutOfBlocksRefusesAtOnceAndTellsPrefillAbort() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30))
                     .kvBlocks(2).blockLease(Duration.ofMinutes(1)).bindNow()) {
            String answer = Completions.post(decode.httpAddress(), body("t-1", LONG_PROMPT, prefill.address()))
                    .block(Duration.ofSeconds(5));

            assertThat(answer).startsWith("503 ").contains("kv_blocks_exhausted");
            await("prefill is told abort", () -> got(toPrefill, NotifyMessage.Abort.class, "t-1"));
        }
    }

    @Test
    void prefillsShutdownTellsDecodeWriteFailedWithTheReasonForWhatDidNotFinishAndReleases() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        try (NotifyServer decode = recorder(toDecode);
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create()) {
            PrefillServer prefill = prefill(FAST, engine, 1000);
            // decode never sends its block list: the write cannot finish
            assertThat(Completions.post(prefill.httpAddress(), body("t-1", "a b", decode.address()))
                    .block(Duration.ofSeconds(5))).startsWith("200 ");

            prefill.close(Duration.ofMillis(100));

            assertThat(toDecode).anySatisfy(m -> assertThat(m).isInstanceOfSatisfying(NotifyMessage.WriteFailed.class,
                    f -> assertThat(f.reason()).contains("prefill is shutting down").contains("t-1")));
            assertThat(toDecode).anyMatch(m -> m instanceof NotifyMessage.Release && m.transferId().equals("t-1"));
            assertThat(prefill.blocks().owners()).isZero();
        }
    }

    @Test
    void kvWhoseChecksumDoesNotMatchDecodesBlocksFailsTheRequestAndIsCountedAsCorrupt() throws Exception {
        List<NotifyMessage> toPrefill = new CopyOnWriteArrayList<>();
        try (NotifyServer prefill = recorder(toPrefill);
             NotifyClient client = NotifyClient.create();
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30)).bindNow()) {
            var bad = Completions.post(decode.httpAddress(), body("t-1", "a b", prefill.address())).toFuture();
            var good = Completions.post(decode.httpAddress(), body("t-2", "a b", prefill.address())).toFuture();
            await("decode sent both block lists", () -> got(toPrefill, NotifyMessage.RemoteBlocks.class, "t-1")
                    && got(toPrefill, NotifyMessage.RemoteBlocks.class, "t-2"));
            List<Long> blocksOf2 = toPrefill.stream().filter(m -> m instanceof NotifyMessage.RemoteBlocks
                    && m.transferId().equals("t-2")).map(m -> ((NotifyMessage.RemoteBlocks) m).blockNotifyList())
                    .findFirst().orElseThrow();

            // t-1's KV as if written into t-2's blocks
            client.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-1", 0, 0,
                    KvChecksum.of("t-1", FAST.layers(), blocksOf2)), Duration.ofSeconds(5)).block();
            client.send(decode.notifyAddress(), new NotifyMessage.WriteDone("t-2", 0, 0,
                    KvChecksum.of("t-2", FAST.layers(), blocksOf2)), Duration.ofSeconds(5)).block();

            assertThat(bad.get(5, java.util.concurrent.TimeUnit.SECONDS)).startsWith("503 ")
                    .contains("content check failed");
            assertThat(good.get(5, java.util.concurrent.TimeUnit.SECONDS)).startsWith("200 ");
            dev.kvflux.serving.metrics.PrometheusText metrics = Completions.metrics(decode.httpAddress());
            assertThat(metrics.count("kvflux_decode_kv_checks_total", "result", "corrupt")).isEqualTo(1);
            assertThat(metrics.count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(1);
        }
    }

    @Test
    void aRequestRejectedByValidationHoldsNothingOnEitherRole() throws Exception {
        List<NotifyMessage> toPeer = new CopyOnWriteArrayList<>();
        try (NotifyServer peer = recorder(toPeer);
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             PrefillServer prefill = prefill(FAST, engine, 1000);
             DecodeServer decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(30)).bindNow()) {
            String invalid = "{\"prompt\": \"a b\", \"max_tokens\": -1, \"kv_transfer_params\": {\"transfer_id\":"
                    + " \"t-1\", \"remote_notify\": \"127.0.0.1:" + peer.address().getPort() + "\"}}";

            assertThat(Completions.post(prefill.httpAddress(), invalid).block(Duration.ofSeconds(5))).startsWith("400 ");
            assertThat(Completions.post(decode.httpAddress(), invalid).block(Duration.ofSeconds(5))).startsWith("400 ");

            assertThat(prefill.stats().requests()).isZero();
            assertThat(prefill.blocks().owners()).isZero();
            assertThat(prefill.writesInFlight()).isZero();
            assertThat(decode.blocks().owners()).isZero();
            assertThat(Completions.metrics(decode.httpAddress()).count("kvflux_decode_requests_running")).isZero();
            assertThat(toPeer).as("neither told the other anything").isEmpty();
        }
    }

    @Test
    void aCopyStillInFlightAfterAnotherFailedKeepsDecodesBlocksUnreleased() throws Exception {
        List<NotifyMessage> toDecode = new CopyOnWriteArrayList<>();
        // the first layer's copy fails 100 ms after it is posted, the second never completes
        try (NotifyServer decode = recorder(toDecode);
             NotifyClient client = NotifyClient.create();
             SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                     .fault(dev.kvflux.bindings.sim.Fault.fail(0, Duration.ofMillis(100), StatusCode.ERR_RDMA_OP,
                             "link down"))
                     .fault(dev.kvflux.bindings.sim.Fault.stall(1)).build();
             PrefillServer prefill = PrefillServer.builder().model(FAST).engine(engine)
                     .transfer(KvfluxConfig.defaults().transfer().withTimeout(Duration.ofMillis(500)))
                     .notifyWithin(Duration.ofSeconds(2)).maxQueuedPrompts(16).kvBlocks(1000).bindNow()) {
            client.send(prefill.notifyAddress(), DescribedDecode.blocks(FAST, "t-1", List.of(7L)),
                    Duration.ofSeconds(5)).block();
            assertThat(Completions.post(prefill.httpAddress(), body("t-1", "a b c", decode.address()))
                    .block(Duration.ofSeconds(5))).startsWith("200 ");

            await("decode is told write_failed", () -> got(toDecode, NotifyMessage.WriteFailed.class, "t-1"));
            await("the transfer settles", () -> prefill.stats().stalledAtRelease() > 0
                    || got(toDecode, NotifyMessage.Release.class, "t-1"));

            assertThat(toDecode).as("a copy may still land in decode's blocks: no release")
                    .noneMatch(m -> m instanceof NotifyMessage.Release);
            assertThat(prefill.stats().stalledAtRelease()).isEqualTo(1);
            assertThat(prefill.blocks().forcedFrees()).isEqualTo(1);
        }
    }
}
