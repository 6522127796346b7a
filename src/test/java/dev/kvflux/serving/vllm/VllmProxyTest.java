package dev.kvflux.serving.vllm;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Role;
import dev.kvflux.tools.vllm.ToyProxy;
import dev.kvflux.tools.vllm.VllmDouble;
import dev.kvflux.serving.proxy.InstanceHealth;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.KvMode;
import io.netty.buffer.Unpooled;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/**
 * kvflux's proxy in front of vLLM MoRIIO instances: they register over ZeroMQ as vLLM's connector does, and each
 * request reaches them as vLLM's proxy sends it (request id, transfer id, each leg's {@code kv_transfer_params},
 * {@code max_tokens}, {@code stream}, data-parallel rank), in WRITE (both legs at once) and READ (prefill first);
 * where vLLM's proxy leaves a client waiting on a failed prefill, this one answers it at once.
 */
class VllmProxyTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final String REQUEST_ID = "___prefill_addr_host:127\\.0\\.0\\.1,handshake:\\d+,notify:\\d+"
            + "___decode_addr_host:127\\.0\\.0\\.1,handshake:\\d+,notify:\\d+_[0-9a-f]{32}";

    private final List<AutoCloseable> open = new ArrayList<>();
    private ProxyServer proxy;
    private int vllmPort;

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable c : open.reversed()) {
            c.close();
        }
    }

    private void startProxy() throws Exception {
        vllmPort = freePort();
        proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(10)))
                .vllmDiscovery(new InetSocketAddress("127.0.0.1", vllmPort), Networks.LOOPBACK).bindNow();
        open.add(proxy);
    }

    private static int freePort() throws java.io.IOException {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private VllmDouble instance(Role role, KvMode mode, int dp, int notify) {
        VllmDouble d = VllmDouble.start(role, mode, dp, notify - 50, notify)
                .registerWith("127.0.0.1:" + vllmPort, Duration.ofMillis(100));
        open.add(d);
        return d;
    }

    /**
     * Waits until /health lists {@code instances}. No deadline of its own: a new ZeroMQ connection once took seconds on
     * a loaded CI host, and registrations that never come fail the test at the suite's per-test timeout
     * (junit-platform.properties).
     */
    private void awaitRegistered(int instances) throws Exception {
        while (true) {
            String health = HttpClient.create().get().uri("http://127.0.0.1:" + proxy.address().getPort() + "/health")
                    .responseContent().aggregate().asString().block(WAIT);
            JsonNode json = dev.kvflux.serving.http.HttpJson.MAPPER.readTree(health);
            if (json.path("prefill").size() + json.path("decode").size() >= instances) {
                return;
            }
            Thread.sleep(20);
        }
    }

    private String post(String path, String body) {
        return HttpClient.create().post().uri("http://127.0.0.1:" + proxy.address().getPort() + path)
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text))
                .block(WAIT);
    }

    @Test
    void aWriteCompletionReachesBothInstancesAsVllmsProxySendsIt() throws Exception {
        startProxy();
        VllmDouble prefill = instance(Role.PREFILL, KvMode.WRITE, 1, 61005);
        VllmDouble decode = instance(Role.DECODE, KvMode.WRITE, 1, 61105);
        awaitRegistered(2);

        String answer = post("/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 5}");

        assertThat(answer).startsWith("200 ").contains("done");
        // in WRITE mode decode's answer can reach the client before prefill's double has recorded its leg
        long until = System.nanoTime() + WAIT.toNanos();
        while (prefill.received().isEmpty() && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        VllmDouble.Received p = prefill.received().getFirst();
        VllmDouble.Received d = decode.received().getFirst();
        assertThat(p.path()).isEqualTo("/v1/completions");
        assertThat(p.requestId()).matches(REQUEST_ID).contains("notify:61005___decode_addr").contains("notify:61105_");
        assertThat(d.requestId()).isEqualTo(p.requestId());
        assertThat(p.dpRank()).isNull();
        assertThat(p.body().path("max_tokens").asInt()).isEqualTo(1);
        assertThat(p.body().path("stream").asBoolean(true)).isFalse();
        JsonNode pkv = p.body().path("kv_transfer_params");
        assertThat(pkv.path("transfer_id").asText()).matches("tx-[0-9a-f-]{36}");
        assertThat(pkv.path("do_remote_decode").asBoolean()).isTrue();
        assertThat(pkv.path("do_remote_prefill").asBoolean(true)).isFalse();
        assertThat(pkv.path("remote_engine_id").isNull()).isTrue();
        assertThat(pkv.path("remote_block_ids").isNull()).isTrue();
        assertThat(pkv.path("remote_dp_size").asInt()).isEqualTo(1);
        assertThat(pkv.path("remote_tp_size").asInt()).isEqualTo(1);
        assertThat(d.body().path("max_tokens").asInt()).isEqualTo(4);
        JsonNode dkv = d.body().path("kv_transfer_params");
        assertThat(dkv.path("transfer_id").asText()).isEqualTo(pkv.path("transfer_id").asText());
        assertThat(dkv.path("do_remote_prefill").asBoolean()).isTrue();
        assertThat(dkv.path("do_remote_decode").asBoolean(true)).isFalse();
        assertThat(dkv.has("remote_dp_rank")).isFalse();
    }

    @Test
    void inReadModePrefillRunsFirstAndItsKvParametersGoToDecode() throws Exception {
        startProxy();
        VllmDouble prefill = instance(Role.PREFILL, KvMode.READ, 1, 61005);
        VllmDouble decode = instance(Role.DECODE, KvMode.READ, 1, 61105);
        awaitRegistered(2);

        String answer = post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],"
                + " \"max_tokens\": 3, \"stream\": true}");

        assertThat(answer).startsWith("200 ").contains("data: [DONE]");
        VllmDouble.Received d = decode.received().getFirst();
        assertThat(d.path()).isEqualTo("/v1/chat/completions");
        assertThat(prefill.received().getFirst().path()).isEqualTo("/v1/chat/completions");
        JsonNode dkv = d.body().path("kv_transfer_params");
        assertThat(dkv.path("remote_engine_id").asText()).isEqualTo("127.0.0.1:60955");
        assertThat(dkv.path("remote_block_ids").toString()).isEqualTo("[[3,4]]");
        assertThat(dkv.path("transfer_id").asText()).startsWith("tx-");
        assertThat(d.body().path("stream").asBoolean()).isTrue();
        assertThat(d.body().path("max_tokens").asInt()).isEqualTo(2);
    }

    @Test
    void prefillsDataParallelRanksAreWalkedInterleavedWithItsInstances() throws Exception {
        startProxy();
        VllmDouble first = instance(Role.PREFILL, KvMode.WRITE, 2, 61005);
        awaitRegistered(1);
        VllmDouble second = instance(Role.PREFILL, KvMode.WRITE, 2, 61205);
        VllmDouble decode = instance(Role.DECODE, KvMode.WRITE, 1, 61105);
        awaitRegistered(3);

        for (int i = 0; i < 4; i++) {
            assertThat(post("/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 2}")).startsWith("200 ");
        }
        // prefill's leg runs on its own in WRITE mode: the last may still be on its way when decode has answered
        long until = System.nanoTime() + WAIT.toNanos();
        while (first.received().size() + second.received().size() < 4 && System.nanoTime() < until) {
            Thread.sleep(10);
        }

        assertThat(first.received()).as("first " + first.received() + " second " + second.received())
                .extracting(VllmDouble.Received::dpRank).containsExactly("0", "1");
        assertThat(second.received()).extracting(VllmDouble.Received::dpRank).containsExactly("0", "1");
        assertThat(decode.received()).extracting(r -> r.body().path("kv_transfer_params").path("remote_dp_rank")
                .asInt()).containsExactly(0, 0, 1, 1);
    }

    @Test
    void aFailingPrefillLegAnswersTheClientAtOnceAndCancelsDecodesLeg() throws Exception {
        startProxy();
        VllmDouble prefill = instance(Role.PREFILL, KvMode.WRITE, 1, 61005);
        VllmDouble decode = instance(Role.DECODE, KvMode.WRITE, 1, 61105);
        awaitRegistered(2);
        prefill.failWith.set(500);
        decode.hold.set(true);

        long start = System.nanoTime();
        String answer = post("/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 5}");
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        long until = System.nanoTime() + WAIT.toNanos();
        while (decode.cancelled.get() == 0 && System.nanoTime() < until) {
            Thread.sleep(10);
        }

        assertThat(answer).startsWith("502 ").contains("prefill_failed").contains("500");
        assertThat(took).isLessThan(Duration.ofSeconds(5));
        assertThat(decode.cancelled).as("decode's held request, cancelled").hasValue(1);
    }

    @Test
    void aPrefillAnswering500ToEveryRequestIsEjectedAfterThreeAndTheOtherServesTheRest() throws Exception {
        startProxy();
        VllmDouble failing = instance(Role.PREFILL, KvMode.WRITE, 1, 61005);
        VllmDouble healthy = instance(Role.PREFILL, KvMode.WRITE, 1, 61006);
        VllmDouble decode = instance(Role.DECODE, KvMode.WRITE, 1, 61105);
        awaitRegistered(3);
        failing.failWith.set(500);
        // decode answers 100 ms late, as a decode waits for its KV: each prefill leg has ended before the next request
        decode.answerDelayMillis.set(100);

        List<String> answers = new java.util.ArrayList<>();
        for (int i = 0; i < 20; i++) {
            answers.add(post("/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 5}"));
        }

        long until = System.nanoTime() + WAIT.toNanos();
        while (failing.received().size() + healthy.received().size() < 20 && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        // a failed prefill leg answers 502 unless decode's answer came first
        assertThat(answers.stream().filter(a -> !a.startsWith("200 "))).as(answers.toString()).hasSizeLessThanOrEqualTo(3)
                .allSatisfy(a -> assertThat(a).startsWith("502 ").contains("prefill_failed"));
        assertThat(answers.subList(6, 20)).as("once ejected, only the healthy prefill is picked")
                .allSatisfy(a -> assertThat(a).startsWith("200 "));
        assertThat(failing.received()).as("three 500s in a row eject it").hasSize(3);
        assertThat(healthy.received()).hasSize(17);
    }

    @Test
    void aRequestWaitingOnADecodeThatNeverAnswersEndsWhenTheHealthChecksEjectIt() throws Exception {
        vllmPort = freePort();
        proxy = ProxyServer.builder().registry(new InstanceRegistry(Duration.ofSeconds(10)))
                .healthChecks(Duration.ofMillis(100), InstanceHealth.defaults())
                .vllmDiscovery(new InetSocketAddress("127.0.0.1", vllmPort), Networks.LOOPBACK).bindNow();
        open.add(proxy);
        instance(Role.PREFILL, KvMode.WRITE, 1, 61005);
        dev.kvflux.tools.bench.Blackhole hole = dev.kvflux.tools.bench.Blackhole.open(64);
        open.add(hole);
        VllmRegistration blackholed = new VllmRegistration(Role.DECODE,
                InetSocketAddress.createUnresolved("127.0.0.1", hole.address().getPort()),
                "host:127.0.0.1,handshake:61050,notify:61150", "127.0.0.1", 61050, 61150, 1, 1, KvMode.WRITE);
        open.add(VllmPinger.start("127.0.0.1:" + vllmPort, blackholed, Duration.ofMillis(100)));
        awaitRegistered(2);

        String answer = post("/v1/completions", "{\"prompt\": \"a b c\", \"max_tokens\": 5}");

        // ended by the ejection (two failed checks), not by the first-byte timeout of a minute: said so, and counted
        assertThat(answer).startsWith("502 ").contains("decode_unreachable").contains("was ejected before it answered");
        assertThat(proxy.meterRegistry().get("kvflux.proxy.upstream.errors").tag("reason", "ejected").counter()
                .count()).isEqualTo(1);
    }

    @Test
    void anInstanceOfTheOtherTransferModeIsNotTaken() throws Exception {
        startProxy();
        instance(Role.PREFILL, KvMode.WRITE, 1, 61005);
        awaitRegistered(1);
        instance(Role.DECODE, KvMode.READ, 1, 61105);
        Thread.sleep(500);

        assertThat(post("/v1/completions", "{\"prompt\": \"a\"}")).startsWith("503 ");
        assertThat(proxy.meterRegistry().get("kvflux.proxy.vllm.registrations").tag("outcome", "mode_mismatch")
                .functionCounter().count()).isPositive();
    }
}
