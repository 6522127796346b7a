package dev.kvflux.tools.bench;

import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.metrics.PrometheusText;
import dev.kvflux.serving.role.Policy;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.tools.chaos.RoleProcess;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.TpRanks;

/**
 * serve-bench's proxy, prefill and decode as processes of their own ({@code kvflux proxy}, {@code prefill},
 * {@code decode} in JVMs like the launcher's), as the GPU backends need: CUDA and HIP IPC map a buffer only into
 * another process. The roles register with the proxy as in a deployment; the figures the table needs beyond the
 * client's come from their {@code /metrics}, counted from after the stack first served a request.
 */
final class ProcessStack implements AutoCloseable {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    private final RoleProcess proxy;
    private final RoleProcess prefill;
    private final RoleProcess decode;
    private final int proxyPort;
    /** {@link #counts()} when the stack first served; zeros until then. */
    private long[] baseline = new long[FIGURES];

    private ProcessStack(RoleProcess proxy, RoleProcess prefill, RoleProcess decode, int proxyPort) {
        this.proxy = proxy;
        this.prefill = prefill;
        this.decode = decode;
        this.proxyPort = proxyPort;
    }

    /**
     * Starts the stack for {@code policy} on {@code settings}' backend, logging under {@code logs} as
     * {@code label-proxy.log} and so on, and returns once a request through the proxy has succeeded.
     *
     * @throws IllegalStateException if a role does not come up, or the proxy routes nothing within 60 s
     */
    static ProcessStack start(ServeBench.Settings settings, Policy policy, KvMode mode, TpRanks tp, Path logs,
            String label, dev.kvflux.serving.proxy.FirstToken firstToken, int proxyMaxInFlight) throws Exception {
        int proxyPort = freePort();
        int discovery = freePort();
        List<String> common = new ArrayList<>(List.of("--backend", settings.backend(), "--proxy",
                "http://127.0.0.1:" + discovery, "--kv-blocks", Integer.toString(settings.kvBlocks()), "--kv-mode",
                mode.wireName()));
        common.addAll(modelArgs(settings.model()));
        if (ServeBench.Settings.GPU_BACKENDS.contains(settings.backend())) {
            common.addAll(List.of("--gpu", Integer.toString(settings.gpu())));
        }
        List<String> prefillArgs = new ArrayList<>(common);
        prefillArgs.addAll(List.of("--tp", Integer.toString(tp.prefillTp()), "--peer-tp",
                Integer.toString(tp.decodeTp())));
        prefillArgs.addAll(List.of("--policy", policy.wireName(), "--transfer-timeout",
                settings.transferTimeout().toMillis() + "ms"));
        List<String> decodeArgs = new ArrayList<>(common);
        decodeArgs.addAll(List.of("--tp", Integer.toString(tp.decodeTp()), "--peer-tp",
                Integer.toString(tp.prefillTp())));
        decodeArgs.addAll(List.of("--transfer-timeout", settings.transferTimeout().toMillis() + "ms"));
        decodeArgs.addAll(policy.decodeDeadline()
                ? List.of("--receive-deadline", settings.kvfluxDeadline().toMillis() + "ms")
                : List.of("--no-receive-deadline"));
        // every compiler, as ./kvflux runs the roles: chaos's C1-only roles start sooner, but they are not what is benchmarked
        RoleProcess proxy = RoleProcess.proxy(proxyPort, discovery, List.of("--first-token", firstToken.wireName(),
                        "--max-in-flight", Integer.toString(proxyMaxInFlight)),
                logs.resolve(label + "-proxy.log")).withFullCompiler();
        RoleProcess decode = new RoleProcess(Role.DECODE, freePort(), RoleProcess.freePorts(tp.decodeTp()), decodeArgs,
                logs.resolve(label + "-decode.log")).withFullCompiler();
        RoleProcess prefill = new RoleProcess(Role.PREFILL, freePort(), RoleProcess.freePorts(tp.prefillTp()), prefillArgs,
                logs.resolve(label + "-prefill.log")).withFullCompiler();
        ProcessStack stack = new ProcessStack(proxy, prefill, decode, proxyPort);
        try {
            for (RoleProcess role : List.of(proxy, decode, prefill)) {
                role.start();
            }
            for (RoleProcess role : List.of(proxy, decode, prefill)) {
                role.awaitHealthy(Duration.ofSeconds(120));
            }
            stack.awaitRouting(Duration.ofSeconds(60));
            stack.baseline = stack.counts();
            return stack;
        } catch (Exception | Error e) {
            stack.close();
            throw e;
        }
    }

    /** The model's options, as the roles' command line takes them. */
    static List<String> modelArgs(ServingModel model) {
        return List.of("--prefill-tokens-per-second", Long.toString((long) model.prefillTokensPerSecond()),
                "--max-batched-tokens", Integer.toString(model.maxBatchedTokens()), "--layers",
                Integer.toString(model.layers()), "--decode-step", model.decodeStep().toNanos() + "ns");
    }

    /** The proxy's completions URL base, for the load. */
    String url() {
        return "http://127.0.0.1:" + proxyPort;
    }

    /** How many figures {@link #figures()} gives. */
    static final int FIGURES = 7;

    /**
     * Failed waits with IN_PROGRESS, write_failed notices, decode deadlines, requests whose KV decode checked and found
     * whole, those it found corrupt, the bytes decode read back for its checks and the microseconds they took: since
     * the stack first served.
     */
    long[] figures() throws IOException, InterruptedException {
        long[] now = counts();
        long[] since = new long[now.length];
        for (int i = 0; i < now.length; i++) {
            since[i] = now[i] - baseline[i];
        }
        return since;
    }

    private long[] counts() throws IOException, InterruptedException {
        PrometheusText p = prefill.metrics();
        PrometheusText d = decode.metrics();
        return new long[] {
            p.count("kvflux_prefill_writes_seconds_count", "outcome", "write_failed", "code", "IN_PROGRESS"),
            d.count("kvflux_notify_notices_total", "result", "write_failed"),
            d.count("kvflux_notify_deadlines_expired_total"),
            d.count("kvflux_decode_kv_checks_total", "result", "verified"),
            d.count("kvflux_decode_kv_checks_total", "result", "corrupt"),
            (long) d.sum("kvflux_decode_kv_checked_bytes"),
            (long) (d.sum("kvflux_decode_kv_check_seconds") * 1e6)};
    }

    private void awaitRouting(Duration within) throws InterruptedException {
        long until = System.nanoTime() + within.toNanos();
        String last = "no answer";
        while (System.nanoTime() - until < 0) {
            try {
                HttpResponse<String> res = HTTP.send(HttpRequest.newBuilder(URI.create(url() + "/v1/completions"))
                        .timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"a b c d\", \"max_tokens\": 1}"))
                        .build(), HttpResponse.BodyHandlers.ofString());
                if (res.statusCode() == 200) {
                    return;
                }
                last = res.statusCode() + " " + res.body();
            } catch (IOException e) {
                last = e.toString();
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException("the proxy routed no request to prefill and decode within "
                + within.toSeconds() + " s (last: " + last + "); see the roles' logs");
    }

    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    @Override
    public void close() throws InterruptedException {
        prefill.close();
        decode.close();
        proxy.close();
    }
}
