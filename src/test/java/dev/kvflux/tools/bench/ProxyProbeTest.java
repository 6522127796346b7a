package dev.kvflux.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** A small run of the proxy probe: the figures it prints are the proxy's real answers. */
class ProxyProbeTest {

    @Test
    @SuppressWarnings("unchecked")
    void aSmallProbeRunShowsInvalidRequestsRefusedFloodsBoundedAndIdleConnectionsClosed() throws IOException {
        ByteArrayOutputStream lines = new ByteArrayOutputStream();

        Map<String, Object> figures = new ProxyProbe(new ProxyProbe.Settings(20, 100, 10, Duration.ofMillis(500), 40),
                new PrintStream(lines, true)).run();

        Map<String, Object> invalid = (Map<String, Object>) figures.get("invalid_requests");
        assertThat(invalid).containsEntry("answers", Map.of("400", 20L)).containsEntry("reached_prefill", 0L);
        Map<String, Object> signed = (Map<String, Object>) figures.get("unsigned_registrations_on_signed_proxy");
        assertThat(signed).containsEntry("answers", Map.of("401", 100L)).containsEntry("live_decode_instances", 1)
                .containsEntry("client_answers_after", Map.of("200", 50L));
        Map<String, Object> unsigned = (Map<String, Object>) figures.get("registrations_on_unsigned_proxy");
        assertThat(unsigned).containsEntry("answers", Map.of("200", 64L, "503", 36L))
                .containsEntry("live_decode_instances", 64);
        Map<String, Object> direct = (Map<String, Object>) figures.get("direct_requests_to_roles");
        assertThat(direct).containsEntry("answers", Map.of("401", 80L)).containsEntry("max_blocks_held_during", 0)
                .containsEntry("max_write_places_during", 0).containsEntry("outbound_connections_and_messages_during", 0L);
        assertThat((Map<String, Object>) figures.get("huge_prompts")).containsEntry("answers", Map.of("400", 4L))
                .containsEntry("legitimate_answers_after", Map.of("200", 20L));
        assertThat((Map<String, Object>) figures.get("hijack_registration")).containsEntry("answer", "409")
                .containsEntry("real_decode_still_registered", true);
        assertThat((Map<String, Object>) figures.get("blackhole_decodes")).containsEntry("ejected", 4L)
                .containsEntry("answers", Map.of("200", 20L));
        Map<String, Object> idle = (Map<String, Object>) figures.get("idle_connections");
        assertThat(idle).containsEntry("opened", 10).containsEntry("closed_by_proxy", 10);
        assertThat(lines.toString()).contains("invalid_requests: ").contains("idle_connections: ");
    }
}
