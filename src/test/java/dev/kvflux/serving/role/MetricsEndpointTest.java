package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.transfer.notify.NotifyEvent;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import reactor.netty.http.client.HttpClient;

/**
 * {@code GET /metrics} on prefill, decode and the proxy, in process over loopback, after one request whose
 * write fails (an injected copy failure on its last layer) and one that succeeds.
 */
class MetricsEndpointTest {
    private static final ServingModel FAST = new ServingModel("fast", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final String BODY = "{\"prompt\": \"a b c d\", \"max_tokens\": 2}";

    /** The three roles, with the first request's write failing and the second succeeding. */
    private record Stack(SimulatedXgmiEngine engine, PrefillServer prefill, DecodeServer decode, ProxyServer proxy)
            implements AutoCloseable {
        static Stack start(MeterRegistry prefillMeters, MeterRegistry decodeMeters, MeterRegistry proxyMeters) {
            return start(prefillMeters, decodeMeters, proxyMeters, Handover.Listener.NONE);
        }

        static Stack start(MeterRegistry prefillMeters, MeterRegistry decodeMeters, MeterRegistry proxyMeters,
                Handover.Listener handover) {
            // batch 3 is the last layer of the first request written
            SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                    .fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();
            PrefillServer.Builder prefill = PrefillServer.builder().model(FAST).engine(engine)
                    .notifyWithin(Duration.ofSeconds(3)).handover(handover);
            DecodeServer.Builder decode = DecodeServer.builder().model(FAST).receiveDeadline(Duration.ofSeconds(5))
                    .handover(handover);
            InstanceRegistry registry = new InstanceRegistry(Duration.ofMinutes(1));
            ProxyServer.Builder proxy = ProxyServer.builder().registry(registry).handover(handover);
            if (prefillMeters != null) {
                prefill.meterRegistry(prefillMeters);
                decode.meterRegistry(decodeMeters);
                proxy.meterRegistry(proxyMeters);
            }
            Stack stack = new Stack(engine, prefill.bindNow(), decode.bindNow(), proxy.bindNow());
            registry.ping(stack.prefill.instance());
            registry.ping(stack.decode.instance());
            return stack;
        }

        /** Posts a completion through the proxy; returns {@code "<status> <body>"}. */
        String complete() {
            return Completions.post(InetSocketAddress.createUnresolved("127.0.0.1", proxy.address().getPort()), BODY)
                    .block(Duration.ofSeconds(10));
        }

        @Override
        public void close() {
            proxy.close();
            prefill.close();
            decode.close();
            engine.close();
        }
    }

    /** {@code GET /metrics}: the content type and the body. */
    private static String[] scrape(InetSocketAddress http) {
        return HttpClient.create().get().uri("http://127.0.0.1:" + http.getPort() + "/metrics")
                .responseSingle((res, body) -> body.asString().map(text -> new String[] {
                        res.responseHeaders().get("content-type"), text}))
                .block(Duration.ofSeconds(5));
    }

    /** {@code GET /metrics}, checked to be Prometheus text: its content type, names, and a TYPE for each family. */
    private static PrometheusText metrics(InetSocketAddress http) {
        String[] answer = scrape(http);
        assertThat(answer[0]).isEqualTo(RoleMetrics.CONTENT_TYPE);
        PrometheusText text = PrometheusText.parse(answer[1]);
        Set<String> typed = new TreeSet<>();
        Matcher types = Pattern.compile("(?m)^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$")
                .matcher(answer[1]);
        while (types.find()) {
            typed.add(types.group(1));
        }
        for (PrometheusText.Sample sample : text.samples()) {
            assertThat(sample.name()).matches("[a-zA-Z_:][a-zA-Z0-9_:]*");
            assertThat(sample.labels().keySet()).allMatch(label -> label.matches("[a-zA-Z_][a-zA-Z0-9_]*"));
            assertThat(typed).as("the TYPE of " + sample.name()).anyMatch(family -> sample.name().equals(family)
                    || sample.name().matches(Pattern.quote(family) + "_(bucket|count|sum|total)"));
        }
        return text;
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).as(what).isTrue();
    }

    @Test
    void afterOneFailedAndOneSuccessfulRequestEachRolesMetricsCountThem() throws Exception {
        try (Stack stack = Stack.start(null, null, null)) {
            assertThat(stack.complete()).startsWith("503 ").contains("injected copy failure");
            assertThat(stack.complete()).startsWith("200 ");
            InetSocketAddress proxyHttp = InetSocketAddress.createUnresolved("127.0.0.1", stack.proxy.address().getPort());
            await("the proxy has timed both answers",
                    () -> metrics(proxyHttp).count("kvflux_proxy_requests_seconds_count") == 2);
            await("both roles hold no blocks", () -> stack.prefill.blocks().owners() == 0
                    && stack.decode.blocks().owners() == 0);

            PrometheusText prefill = metrics(stack.prefill.httpAddress());
            assertThat(prefill.count("kvflux_prefill_requests_total", "role", "prefill")).isEqualTo(2);
            assertThat(prefill.count("kvflux_prefill_writes_seconds_count", "outcome", "write_done", "code", "SUCCESS"))
                    .isEqualTo(1);
            assertThat(prefill.count("kvflux_prefill_writes_seconds_count", "outcome", "write_failed", "code",
                    "ERR_GPU_OP")).isEqualTo(1);
            assertThat(prefill.has("kvflux_prefill_writes_seconds_bucket")).as("a histogram for quantiles").isTrue();
            assertThat(prefill.count("kvflux_notify_messages_sent_total")).as("write_failed, write_done and two releases")
                    .isEqualTo(4);
            assertThat(prefill.count("kvflux_blocks", "state", "free")).isEqualTo(PrefillServer.DEFAULT_KV_BLOCKS);
            assertThat(prefill.count("kvflux_prefill_transfers_running")).isZero();
            assertThat(prefill.count("kvflux_wait_duration_seconds_count", "outcome", "done")).as("the wait recorder")
                    .isEqualTo(1);
            assertThat(prefill.count("kvflux_wait_duration_seconds_count", "outcome", "failed")).isEqualTo(1);
            assertThat(prefill.count("kvflux_wait_statuses_failed_total", "code", "ERR_GPU_OP")).isEqualTo(1);
            assertThat(prefill.count("kvflux_wait_detection_lag_seconds_count")).as("the simulated copies' end is known")
                    .isEqualTo(1);
            assertThat(prefill.count("kvflux_wait_detection_lag_seconds_bucket", "le", "+Inf")).isEqualTo(1);
            // the handover's stages, each timed from the role's stage before it: only the request written reached the
            // stages after its copies; both posted every layer (the failure struck the first one's last copy)
            assertThat(prefill.count("kvflux_handover_stage_seconds_count", "stage", "last_layer_ready")).isEqualTo(2);
            assertThat(prefill.count("kvflux_handover_stage_seconds_count", "stage", "last_copy_ended")).isEqualTo(1);
            assertThat(prefill.count("kvflux_handover_stage_seconds_count", "stage", "wait_ended")).isEqualTo(1);
            assertThat(prefill.count("kvflux_transfer_bytes_per_second_count")).as("the written request's throughput")
                    .isEqualTo(1);
            // 4 layers of one 16-token block of 64 bytes a token, over at least the simulated link's 4 x 12.5 us
            assertThat(prefill.sum("kvflux_transfer_bytes_per_second_sum")).isPositive()
                    .isLessThanOrEqualTo(4 * 16 * 64 / 50e-6);
            assertThat(prefill.sum("kvflux_role_start_time_seconds") * 1000)
                    .isBetween(System.currentTimeMillis() - 60_000.0, System.currentTimeMillis() + 1.0);

            PrometheusText decode = metrics(stack.decode.httpAddress());
            assertThat(decode.count("kvflux_notify_notices_total", "role", "decode", "result", "write_done")).isEqualTo(1);
            assertThat(decode.count("kvflux_notify_notices_total", "role", "decode", "result", "write_failed"))
                    .isEqualTo(1);
            assertThat(decode.count("kvflux_decode_kv_wait_seconds_count", "outcome", "write_done")).isEqualTo(1);
            assertThat(decode.count("kvflux_decode_kv_wait_seconds_count", "outcome", "write_failed")).isEqualTo(1);
            assertThat(decode.count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(1);
            assertThat(decode.count("kvflux_decode_requests_running")).isZero();
            assertThat(decode.count("kvflux_notify_frames_rejected_total")).isZero();
            assertThat(decode.count("kvflux_handover_stage_seconds_count", "stage", "decode_admitted")).isEqualTo(1);
            assertThat(decode.count("kvflux_handover_stage_seconds_count", "stage", "first_token_out")).isEqualTo(1);

            PrometheusText proxy = metrics(proxyHttp);
            assertThat(proxy.count("kvflux_proxy_requests_seconds_count", "status", "200")).isEqualTo(1);
            assertThat(proxy.count("kvflux_proxy_requests_seconds_count", "status", "503")).isEqualTo(1);
            assertThat(proxy.count("kvflux_proxy_upstream_errors_total")).as("decode answered both").isZero();
            assertThat(proxy.count("kvflux_proxy_instances", "upstream", "prefill")).isEqualTo(1);
            assertThat(proxy.count("kvflux_proxy_instances", "upstream", "decode")).isEqualTo(1);
            assertThat(proxy.count("kvflux_handover_stage_seconds_count", "stage", "client_first_byte"))
                    .as("decode's answer passed on, its 503 too").isEqualTo(2);

            assertThat(stack.prefill.stats().writesDone()).as("the accessors read the same meters").isEqualTo(1);
            assertThat(stack.prefill.stats().writesFailed()).isEqualTo(1);
            assertThat(stack.decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_FAILED)).isEqualTo(1);
        }
    }

    @Test
    void aWrittenRequestReachesEveryHandoverStageInOrderOnOneClock() throws Exception {
        Map<String, Map<Handover.Stage, Long>> marks = new ConcurrentHashMap<>();
        Handover.Listener listener = (id, stage, at) -> marks.computeIfAbsent(id, k -> new ConcurrentHashMap<>())
                .put(stage, at);
        try (Stack stack = Stack.start(null, null, null, listener)) {
            stack.complete();
            assertThat(stack.complete()).startsWith("200 ");
            await("one request reached the client's first byte after its KV was written", () -> marks.values().stream()
                    .anyMatch(m -> m.containsKey(Handover.Stage.WAIT_ENDED)
                            && m.containsKey(Handover.Stage.CLIENT_FIRST_BYTE)));
            Map<Handover.Stage, Long> written = marks.values().stream()
                    .filter(m -> m.containsKey(Handover.Stage.WAIT_ENDED)).findFirst().orElseThrow();
            // prefill's answer stands beside the chain: the proxy marks it only if it came before decode's first byte
            List<Handover.Stage> chain = java.util.Arrays.stream(Handover.Stage.values())
                    .filter(s -> s != Handover.Stage.PREFILL_ANSWERED).toList();
            assertThat(written).containsKeys(chain.toArray(Handover.Stage[]::new));
            // the last copy's end is when the engine says it ended, which may come before the post of the last layer
            // returned; every other stage follows the one before it
            for (int i = 1; i < chain.size(); i++) {
                if (chain.get(i) != Handover.Stage.LAST_COPY_ENDED) {
                    assertThat(written.get(chain.get(i))).as(chain.get(i).label())
                            .isGreaterThanOrEqualTo(written.get(chain.get(i - 1)));
                }
            }
            Map<Handover.Stage, Long> failed = marks.values().stream()
                    .filter(m -> !m.containsKey(Handover.Stage.WAIT_ENDED)).findFirst().orElseThrow();
            assertThat(failed).as("the failed write's request: no copy end, no wait end, no decode step")
                    .doesNotContainKeys(Handover.Stage.LAST_COPY_ENDED, Handover.Stage.WRITE_DONE_RECEIVED,
                            Handover.Stage.DECODE_ADMITTED, Handover.Stage.FIRST_TOKEN_OUT)
                    .containsKeys(Handover.Stage.PROXY_IN, Handover.Stage.PREFILL_ADMITTED);
        }
    }

    @Test
    void rolesStartedWithTheirOwnRegistryRecordIntoItAndStillServeMetrics() throws Exception {
        SimpleMeterRegistry prefillMeters = new SimpleMeterRegistry();
        SimpleMeterRegistry decodeMeters = new SimpleMeterRegistry();
        SimpleMeterRegistry proxyMeters = new SimpleMeterRegistry();
        try (Stack stack = Stack.start(prefillMeters, decodeMeters, proxyMeters)) {
            stack.complete();
            assertThat(stack.complete()).startsWith("200 ");
            await("the proxy has timed both answers", () -> proxyMeters.find("kvflux.proxy.requests").timers().stream()
                    .mapToLong(io.micrometer.core.instrument.Timer::count).sum() == 2);

            assertThat(prefillMeters.get("kvflux.prefill.writes").tags("outcome", "write_done", "role", "prefill")
                    .timer().count()).isEqualTo(1);
            assertThat(decodeMeters.get("kvflux.notify.notices").tags("result", "write_done", "role", "decode")
                    .counter().count()).isEqualTo(1);
            assertThat(decodeMeters.get("kvflux.blocks").tags("state", "free").gauge().value())
                    .isEqualTo(DecodeServer.DEFAULT_KV_BLOCKS);
            assertThat(proxyMeters.get("kvflux.proxy.requests").tags("status", "200").timer().count()).isEqualTo(1);
            assertThat(stack.prefill.stats().writesDone()).as("the accessors read through the given registry")
                    .isEqualTo(1);
            assertThat(stack.decode.notifyMeters().count(NotifyEvent.NOTICE_WRITE_DONE)).isEqualTo(1);
            assertThat(metrics(stack.prefill.httpAddress()).count("kvflux_prefill_writes_seconds_count", "outcome",
                    "write_done")).as("served beside the given registry").isEqualTo(1);
        }
        assertThat(prefillMeters.find("kvflux.blocks").gauges()).as("a stopped role's gauges are removed").isEmpty();
    }

    @Test
    void everyMeterTheDashboardQueriesIsExportedByTheRoles() throws Exception {
        JsonNode dashboard = HttpJson.MAPPER.readTree(Files.readString(dashboard()));
        Set<String> queried = new TreeSet<>();
        Pattern name = Pattern.compile("kvflux_[a-z0-9_]+");
        for (JsonNode expr : dashboard.findValues("expr")) {
            Matcher m = name.matcher(expr.asText());
            while (m.find()) {
                queried.add(m.group());
            }
        }
        for (JsonNode variable : dashboard.path("templating").path("list")) {
            Matcher m = name.matcher(variable.path("definition").asText());
            while (m.find()) {
                queried.add(m.group());
            }
        }
        assertThat(queried).as("the dashboard queries kvflux meters").hasSizeGreaterThan(10);

        Set<String> exported = new TreeSet<>();
        try (Stack stack = Stack.start(null, null, null)) {
            stack.complete();
            stack.complete();
            List<InetSocketAddress> roles = new ArrayList<>(List.of(stack.prefill.httpAddress(),
                    stack.decode.httpAddress(),
                    InetSocketAddress.createUnresolved("127.0.0.1", stack.proxy.address().getPort())));
            for (InetSocketAddress role : roles) {
                for (PrometheusText.Sample sample : metrics(role).samples()) {
                    exported.add(sample.name());
                }
            }
        }
        assertThat(exported).containsAll(queried);
    }

    /** docs/grafana/kvflux.json, found from the module's directory or the repository's. */
    private static Path dashboard() throws IOException {
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("docs/grafana/kvflux.json");
            if (Files.isRegularFile(candidate)) {
                return candidate;
            }
        }
        throw new IOException("docs/grafana/kvflux.json not found above " + Path.of("").toAbsolutePath());
    }
}
