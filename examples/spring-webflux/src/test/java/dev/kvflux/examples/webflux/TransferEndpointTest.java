package dev.kvflux.examples.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.micrometer.metrics.test.autoconfigure.AutoConfigureMetrics;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * The application on a random port, driven over HTTP: transfers on the simulated engine in real time (a
 * few layers take well under a millisecond), a stall found after 100 ms.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"kvflux.transfer.timeout=5s", "kvflux.transfer.stall-after=100ms"})
@AutoConfigureWebTestClient
@AutoConfigureMetrics
@ExtendWith(OutputCaptureExtension.class)
class TransferEndpointTest {

    @Autowired
    WebTestClient client;

    @Test
    void aTransferWithoutFaultAnswersWriteDoneWithItsTransferId() {
        post(Map.of("transferId", "req-done-1", "layers", 4, "blocksPerLayer", 8))
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.transferId").isEqualTo("req-done-1")
                .jsonPath("$.outcome").isEqualTo("write_done")
                .jsonPath("$.code").doesNotExist()
                .jsonPath("$.kind").doesNotExist();
    }

    @Test
    void aTransferWithoutIdIsGivenOne() {
        post(Map.of("layers", 2, "blocksPerLayer", 2))
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.transferId").value(String.class, id -> assertThat(id).hasSize(36))
                .jsonPath("$.outcome").isEqualTo("write_done");
    }

    /** The kind is what the wait saw; it reaches the answer only through the transfer's Reactor Context. */
    @Test
    void anInjectedStatusFailureAnswersWriteFailedWithItsCodeKindAndReason() {
        post(Map.of("transferId", "req-fail-1", "layers", 4, "blocksPerLayer", 8,
                "fault", Map.of("kind", "fail", "layer", 2, "code", "ERR_RDMA_OP", "message", "link down")))
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.transferId").isEqualTo("req-fail-1")
                .jsonPath("$.outcome").isEqualTo("write_failed")
                .jsonPath("$.code").isEqualTo("ERR_RDMA_OP")
                .jsonPath("$.kind").isEqualTo("FAILED")
                .jsonPath("$.reason").isEqualTo("link down");
    }

    /** The wait's log line does not name the transfer: the id comes from the Context through the MDC. */
    @Test
    void theWaitLogsUnderTheTransferIdFromTheReactorContext(CapturedOutput output) {
        post(Map.of("transferId", "req-log-1", "layers", 2, "blocksPerLayer", 2,
                "fault", Map.of("kind", "fail", "layer", 1)))
                .expectStatus().isOk();

        assertThat(output.getAll().lines().filter(line -> line.contains("wait ended FAILED")))
                .anySatisfy(line -> assertThat(line).contains("[req-log-1] "));
    }

    @Test
    void aStalledLayerAnswersWriteFailedAsStalled() {
        post(Map.of("layers", 3, "blocksPerLayer", 4, "fault", Map.of("kind", "stall", "layer", 1)))
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.outcome").isEqualTo("write_failed")
                .jsonPath("$.code").isEqualTo("IN_PROGRESS")
                .jsonPath("$.kind").isEqualTo("STALLED")
                .jsonPath("$.reason").value(String.class, reason -> assertThat(reason).contains("stalled"));
    }

    @Test
    void prometheusShowsKvfluxMetersAfterTransfers() {
        post(Map.of("layers", 2, "blocksPerLayer", 2)).expectStatus().isOk();
        post(Map.of("layers", 2, "blocksPerLayer", 2,
                "fault", Map.of("kind", "fail", "layer", 0, "code", "ERR_GPU_OP")))
                .expectStatus().isOk();

        String scrape = client.get().uri("/actuator/prometheus").exchange()
                .expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();

        assertThat(scrape)
                // kvflux-micrometer's recorder
                .containsPattern("kvflux_wait_duration_seconds_count\\{outcome=\"done\",strategy=\"reactive\"} [1-9]")
                .containsPattern("kvflux_wait_duration_seconds_count\\{outcome=\"failed\",strategy=\"reactive\"} [1-9]")
                .containsPattern("kvflux_wait_statuses_failed_total\\{code=\"ERR_GPU_OP\",strategy=\"reactive\"} [1-9]")
                .containsPattern("kvflux_wait_detection_lag_seconds_count\\{strategy=\"reactive\"} [1-9]")
                .containsPattern("kvflux_wait_polls_total\\{strategy=\"reactive\"} [1-9]")
                // Reactor's tap over the named wait and over the whole write
                .containsPattern("kvflux_wait_flow_duration_seconds_count\\{exception=\"dev.kvflux.operators.TransferException\","
                        + "fail_mode=\"fail_fast\",status=\"error\",strategy=\"reactive\",type=\"Mono\"} [1-9]")
                .containsPattern("kvflux_transfer_flow_duration_seconds_count\\{[^}]*status=\"completed\"[^}]*} [1-9]")
                // the application's own
                .containsPattern("kvflux_transfer_outcomes_total\\{code=\"ERR_GPU_OP\",kind=\"FAILED\","
                        + "outcome=\"write_failed\"} [1-9]")
                .contains("kvflux_pipeline_requests_in_flight")
                .contains("kvflux_pipeline_requests_queued");
    }

    @Test
    void anInvalidBodyAnswers400NamingEachField() {
        post(Map.of("layers", 0, "blocksPerLayer", 5000))
                .expectStatus().isBadRequest()
                .expectBody()
                .jsonPath("$.status").isEqualTo(400)
                .jsonPath("$.detail").isEqualTo("blocksPerLayer must be less than or equal to 4096 (got 5000);"
                        + " layers must be greater than or equal to 1 (got 0)");
    }

    @Test
    void aFaultOutsideTheLayersAnswers400() {
        post(Map.of("layers", 2, "blocksPerLayer", 2, "fault", Map.of("kind", "stall", "layer", 2)))
                .expectStatus().isBadRequest()
                .expectBody()
                .jsonPath("$.detail").value(String.class, detail -> assertThat(detail)
                        .contains("fault.layer must be one of the request's layers"));
    }

    @Test
    void aFaultKindThatDoesNotExistAnswers400ListingTheKinds() {
        post(Map.of("layers", 2, "blocksPerLayer", 2, "fault", Map.of("kind", "explode", "layer", 0)))
                .expectStatus().isBadRequest()
                .expectBody()
                .jsonPath("$.detail").value(String.class, detail -> assertThat(detail)
                        .startsWith("unreadable body:").contains("explode").contains("fail", "stall", "slow"));
    }

    private WebTestClient.ResponseSpec post(Map<String, Object> body) {
        return client.post().uri("/transfers").contentType(MediaType.APPLICATION_JSON).bodyValue(body).exchange();
    }
}
