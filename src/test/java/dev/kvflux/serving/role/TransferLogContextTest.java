package dev.kvflux.serving.role;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.spi.ILoggingEvent;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.observe.LogRecorder;
import dev.kvflux.serving.observe.Tracing;
import dev.kvflux.transfer.LogContext;
import io.netty.buffer.Unpooled;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;

/**
 * The transfer id reaches the MDC of every log line about a request, on prefill and on decode, whichever
 * thread writes it: two requests run at once through an in-process prefill and decode, one whose copy fails
 * (prefill logs the failed wait, decode the notice) and one whose notice never comes (decode's receive deadline,
 * prefill's abort), with every kvflux logger at debug level.
 */
class TransferLogContextTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);
    private static final String FAILED = "mdc-copy-fails";
    private static final String LATE = "mdc-never-written";

    private LogRecorder recorder;

    @BeforeEach
    void record() {
        recorder = LogRecorder.record();
    }

    @AfterEach
    void stopRecording() {
        recorder.close();
    }

    private static String body(String id, InetSocketAddress peerNotify) {
        return "{\"prompt\": \"a b c\", \"max_tokens\": 2, \"kv_transfer_params\": {\"transfer_id\": \"" + id
                + "\", \"remote_notify\": \"127.0.0.1:" + peerNotify.getPort() + "\"}}";
    }

    @Test
    void everyLogLineAboutARequestCarriesItsTransferIdAndNoOtherRequestsLinesDo() throws Exception {
        // the first request's last layer (batch 3 of 4) fails; the second is never sent to prefill at all
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();
        try (engine;
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(1)).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .transferTimeout(Duration.ofMillis(300)).notifyWithin(Duration.ofSeconds(3)).bindNow()) {
            CompletableFuture<String> failedAtDecode = Completions.post(decode.httpAddress(),
                    body(FAILED, prefill.notifyAddress())).toFuture();
            CompletableFuture<String> failedAtPrefill = Completions.post(prefill.httpAddress(),
                    body(FAILED, decode.notifyAddress())).toFuture();
            CompletableFuture<String> late = Completions.post(decode.httpAddress(),
                    body(LATE, prefill.notifyAddress())).toFuture();

            assertThat(failedAtDecode.get(10, TimeUnit.SECONDS)).startsWith("503 ").contains("injected copy failure");
            assertThat(failedAtPrefill.get(10, TimeUnit.SECONDS)).startsWith("200 ");
            assertThat(late.get(10, TimeUnit.SECONDS)).startsWith("504 ");
            awaitLogged("prefill hears of the late request's abort", LATE, "PrefillSide");
        }

        for (String id : List.of(FAILED, LATE)) {
            List<ILoggingEvent> about = recorder.events().stream()
                    .filter(e -> e.getFormattedMessage().contains(id)).toList();
            assertThat(about).as("log lines about %s", id).isNotEmpty()
                    .allSatisfy(e -> assertThat(e.getMDCPropertyMap()).as(e.getLoggerName() + ": "
                            + e.getFormattedMessage()).containsEntry(LogContext.TRANSFER_ID, id));
            String other = id.equals(FAILED) ? LATE : FAILED;
            assertThat(recorder.events()).filteredOn(e -> id.equals(e.getMDCPropertyMap().get(LogContext.TRANSFER_ID)))
                    .as("lines carrying %s", id).noneMatch(e -> e.getFormattedMessage().contains(other));
        }
        assertThat(loggers(FAILED)).as("the failed copy is logged on both sides")
                .anyMatch(name -> name.endsWith("PrefillSide"))
                .anyMatch(name -> name.endsWith("DecodeSide") || name.endsWith("ExpectedTransfers")
                        || name.endsWith("NotifyServer"));
        assertThat(loggers(LATE)).as("the missed deadline is logged on both sides")
                .anyMatch(name -> name.endsWith("ExpectedTransfers"))
                .anyMatch(name -> name.endsWith("PrefillSide"));
    }

    @Test
    void aTracedRequestsLogLinesAlsoCarryItsTraceId() throws Exception {
        String traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
        String traceparent = "00-" + traceId + "-00f067aa0ba902b7-01";
        SimulatedXgmiEngine engine = SimulatedXgmiEngine.builder()
                .fault(Fault.fail(3, Duration.ofMillis(1), StatusCode.ERR_GPU_OP, "injected copy failure")).build();
        try (OpenTelemetrySdk otel = OpenTelemetrySdk.builder().setTracerProvider(SdkTracerProvider.builder()
                     .addSpanProcessor(SimpleSpanProcessor.create(InMemorySpanExporter.create())).build()).build();
             engine;
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(1))
                     .observationRegistry(Tracing.registry(otel, "kvflux-decode")).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .transferTimeout(Duration.ofMillis(300)).notifyWithin(Duration.ofSeconds(3))
                     .observationRegistry(Tracing.registry(otel, "kvflux-prefill")).bindNow()) {
            CompletableFuture<String> atDecode = post(decode.httpAddress(), body(FAILED, prefill.notifyAddress()),
                    traceparent).toFuture();
            CompletableFuture<String> atPrefill = post(prefill.httpAddress(), body(FAILED, decode.notifyAddress()),
                    traceparent).toFuture();

            assertThat(atDecode.get(10, TimeUnit.SECONDS)).startsWith("503 ");
            assertThat(atPrefill.get(10, TimeUnit.SECONDS)).startsWith("200 ");
        }

        assertThat(recorder.events()).filteredOn(e -> e.getFormattedMessage().contains(FAILED)).isNotEmpty()
                .allSatisfy(e -> assertThat(e.getMDCPropertyMap()).as(e.getLoggerName() + ": "
                        + e.getFormattedMessage()).containsEntry(LogContext.TRANSFER_ID, FAILED)
                        .containsEntry(LogContext.TRACE_ID, traceId));
        assertThat(loggers(FAILED)).anyMatch(name -> name.endsWith("PrefillSide"))
                .anyMatch(name -> name.endsWith("DecodeSide"));
    }

    /** Posts a completion with a traceparent header, as the proxy does; emits {@code "<status> <body>"}. */
    private static Mono<String> post(InetSocketAddress http, String body, String traceparent) {
        return HttpClient.create().headers(h -> h.set("traceparent", traceparent)).post()
                .uri("http://127.0.0.1:" + http.getPort() + "/v1/completions")
                .send(Mono.just(Unpooled.wrappedBuffer(body.getBytes(StandardCharsets.UTF_8))))
                .responseSingle((res, content) -> content.asString().defaultIfEmpty("")
                        .map(text -> res.status().code() + " " + text));
    }

    private List<String> loggers(String id) {
        return recorder.events().stream().filter(e -> id.equals(e.getMDCPropertyMap().get(LogContext.TRANSFER_ID)))
                .map(ILoggingEvent::getLoggerName).distinct().toList();
    }

    private void awaitLogged(String what, String id, String logger) throws InterruptedException {
        for (int i = 0; i < 500 && !loggers(id).stream().anyMatch(name -> name.endsWith(logger)); i++) {
            Thread.sleep(10);
        }
        assertThat(loggers(id)).as(what).anyMatch(name -> name.endsWith(logger));
    }
}
