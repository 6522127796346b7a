package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.metrics.PrometheusText;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The roles over the C simulator in processes of their own: decode registers shared host memory with its engine and
 * sends its descriptors; prefill maps that memory and writes every block's bytes into it through FFM; decode checks
 * them; a decode killed with SIGKILL and started again gets a new session, and the old one's mapping is closed.
 */
// real processes (role JVMs, etcd, a Python proxy) start and stop in each test, which takes minutes on a loaded
// 2-core host; the claims are about what ended how, not how soon, so the bound is only a guard against a hang
@org.junit.jupiter.api.Timeout(value = 5, unit = java.util.concurrent.TimeUnit.MINUTES)
class NativeSimRolesTest {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private static final List<String> ROLE = List.of("--backend", "native-sim", "--layers", "2", "--kv-blocks", "256",
            "--decode-step", "1ms");

    @TempDir
    Path logs;

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    private static HttpResponse<String> complete(int proxyPort) throws IOException, InterruptedException {
        return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + proxyPort + "/v1/completions"))
                .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + "w ".repeat(200) + "\", \"max_tokens\": 2}"))
                .build(), HttpResponse.BodyHandlers.ofString());
    }

    /** The first 200 within {@code within}, retrying what the proxy cannot route yet. */
    private static HttpResponse<String> completeWithin(int proxyPort, Duration within) throws Exception {
        long until = System.nanoTime() + within.toNanos();
        HttpResponse<String> last = null;
        while (System.nanoTime() - until < 0) {
            last = complete(proxyPort);
            if (last.statusCode() == 200) {
                return last;
            }
            Thread.sleep(200);
        }
        return last;
    }

    @Test
    void prefillWritesIntoDecodesSharedMemoryAndARestartedDecodeGetsANewSessionWhileTheOldMappingCloses()
            throws Exception {
        int proxyPort = freePort();
        int discovery = freePort();
        List<String> registration = List.of("--proxy", "http://127.0.0.1:" + discovery);
        try (RoleProcess proxy = RoleProcess.proxy(proxyPort, discovery, List.of(), logs.resolve("proxy.log"));
             RoleProcess decode = new RoleProcess(Role.DECODE, freePort(), freePort(), concat(ROLE, registration),
                     logs.resolve("decode.log"));
             RoleProcess prefill = new RoleProcess(Role.PREFILL, freePort(), freePort(), concat(ROLE, registration),
                     logs.resolve("prefill.log"))) {
            proxy.start();
            decode.start();
            prefill.start();
            for (RoleProcess role : List.of(proxy, decode, prefill)) {
                role.awaitHealthy(Duration.ofSeconds(60));
            }

            assertThat(completeWithin(proxyPort, Duration.ofSeconds(30)).statusCode()).isEqualTo(200);
            for (int i = 0; i < 4; i++) {
                assertThat(complete(proxyPort).statusCode()).isEqualTo(200);
            }
            PrometheusText d = decode.metrics();
            assertThat(d.count("kvflux_decode_kv_checks_total", "result", "verified")).isEqualTo(5);
            assertThat(d.count("kvflux_decode_kv_checks_total", "result", "corrupt")).isZero();
            assertThat(d.count("kvflux_decode_kv_checked_bytes")).as("every block of 2 layers, 4 blocks each")
                    .isEqualTo(5L * 2 * 4 * 64 * 1152);
            PrometheusText p = prefill.metrics();
            assertThat(p.count("kvflux_engine_peer_mappings_open")).isEqualTo(1);
            assertThat(p.count("kvflux_prefill_decode_sessions_open")).isEqualTo(1);
            assertThat(p.count("kvflux_engine_handles_open")).as("engine, region, decode's region, session")
                    .isEqualTo(4);

            decode.kill();
            decode.start();
            decode.awaitHealthy(Duration.ofSeconds(60));
            assertThat(completeWithin(proxyPort, Duration.ofSeconds(30)).statusCode()).isEqualTo(200);
            assertThat(complete(proxyPort).statusCode()).isEqualTo(200);

            p = prefill.metrics();
            assertThat(p.count("kvflux_prefill_decode_sessions_open")).as("the killed decode's session is gone")
                    .isEqualTo(1);
            assertThat(p.count("kvflux_engine_peer_mappings_open")).isEqualTo(1);
            assertThat(p.count("kvflux_engine_handles_open")).isEqualTo(4);
            assertThat(decode.metrics().count("kvflux_decode_kv_checks_total", "result", "corrupt")).isZero();
            assertThat(Files.readString(logs.resolve("prefill.log"))).contains("opened a session into decode");
        }
    }

    private static List<String> concat(List<String> a, List<String> b) {
        return java.util.stream.Stream.concat(a.stream(), b.stream()).toList();
    }
}
