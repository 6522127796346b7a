package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.ChatSchema;
import dev.kvflux.serving.api.CompletionApi;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.vllm.VllmRegistration;
import dev.kvflux.transfer.KvMode;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.timeout.ReadTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServerResponse;
import reactor.netty.internal.shaded.reactor.pool.PoolAcquirePendingLimitException;

/**
 * A completion sent to a pair of vLLM instances as vLLM's MoRIIO proxy sends it, so that the instances cannot tell the
 * difference: the request id {@code ___prefill_addr_{P's zmq}___decode_addr_{D's zmq}_{32 hex}}
 * ({@code X-Request-Id}), a transfer id {@code tx-{uuid4}}, each leg's {@code kv_transfer_params}, prefill's
 * {@code max_tokens} 1 and {@code stream} false, decode's {@code max_tokens} one less, and prefill's data-parallel
 * rank ({@code X-data-parallel-rank}) from one walk over every (instance, rank) slot. In WRITE mode both legs start
 * at once; in READ mode prefill runs first and its answer's {@code kv_transfer_params} go to decode.
 *
 * <p>Where vLLM's proxy leaves a client waiting, this one does not: prefill's failure (an error status, or no answer)
 * answers the client at once with the reason and cancels decode's leg, and decode's answer is bounded and watched as
 * every answer the proxy relays ({@link StreamWatch}, first-byte deadlines, canaries).
 */
final class VllmLegs {
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);
    /** The most bytes of prefill's answer read in READ mode: its one token and its {@code kv_transfer_params}. */
    private static final int MAX_PREFILL_ANSWER_BYTES = 1 << 20;
    private static final int NOBODY = 0;
    private static final int DECODE_OWNS = 1;
    private static final int PREFILL_OWNS = 2;

    private VllmLegs() {
    }

    /** The instances a request goes to, and prefill's data-parallel rank (null for one rank). */
    record Pair(Instance prefill, VllmRegistration p, Integer prefillRank, Instance decode, VllmRegistration d) {
    }

    /** The next pair of vLLM instances, or null when there is no vLLM prefill or decode. */
    static Pair choose(ProxyRoutes.Handlers h) {
        List<Instance> prefills = candidates(h, Role.PREFILL);
        List<Instance> decodes = candidates(h, Role.DECODE);
        if (prefills.isEmpty() || decodes.isEmpty()) {
            return null;
        }
        long n = h.vllm().nextRequest();
        int[] p = slot(n, prefills.size(), h.vllm().registration(prefills.getFirst()).dpSize());
        int[] d = slot(n, decodes.size(), h.vllm().registration(decodes.getFirst()).dpSize());
        Instance prefill = prefills.get(p[0]);
        Instance decode = decodes.get(d[0]);
        VllmRegistration pr = h.vllm().registration(prefill);
        VllmRegistration dr = h.vllm().registration(decode);
        if (pr == null || dr == null) {
            return null; // dropped meanwhile
        }
        return new Pair(prefill, pr, pr.dpSize() > 1 ? p[1] : null, decode, dr);
    }

    /** The role's vLLM instances the proxy may use now: the usable ones, else all of them. */
    private static List<Instance> candidates(ProxyRoutes.Handlers h, Role role) {
        List<Instance> all = h.registry().live(role).stream().filter(h.vllm()::isVllm).toList();
        List<Instance> usable = all.stream().filter(h.health()::usable).toList();
        return usable.isEmpty() ? all : usable;
    }

    /**
     * Request {@code n}'s slot, as vLLM's proxy walks them: one counter over {@code instances} times {@code dpSize}
     * slots, interleaved (instance 0 rank 0, instance 1 rank 0, instance 0 rank 1, ...); {instance, rank}.
     */
    static int[] slot(long n, int instances, int dpSize) {
        long slot = Math.floorMod(n - 1, (long) instances * dpSize);
        return new int[] {(int) (slot % instances), (int) (slot / instances)};
    }

    /** The request id vLLM's connector reads both peers' ZeroMQ addresses from. */
    static String requestId(VllmRegistration p, VllmRegistration d) {
        return "___prefill_addr_" + p.zmqAddress() + "___decode_addr_" + d.zmqAddress() + "_"
                + UUID.randomUUID().toString().replace("-", "");
    }

    /** The request to prefill: the client's, with one token, not streamed, and the transfer's parameters. */
    static ObjectNode toPrefill(ObjectNode json, String transferId, VllmRegistration d) {
        ObjectNode toPrefill = json.deepCopy();
        ObjectNode kv = toPrefill.putObject("kv_transfer_params");
        kv.put("remote_dp_size", d.dpSize()).put("remote_tp_size", d.tpSize()).put("transfer_id", transferId)
                .put("do_remote_decode", true).put("do_remote_prefill", false).putNull("remote_engine_id")
                .putNull("remote_block_ids");
        return ProxyRoutes.Handlers.oneToken(toPrefill);
    }

    /** The request to decode: the client's, with one token less, and the transfer's parameters. */
    static ObjectNode toDecode(ObjectNode json, String transferId, VllmRegistration p, Integer prefillRank) {
        ObjectNode toDecode = json.deepCopy();
        JsonNode max = toDecode.get("max_tokens");
        if (max != null && max.isIntegralNumber()) {
            toDecode.put("max_tokens", max.asInt() - 1);
        }
        ObjectNode kv = toDecode.putObject("kv_transfer_params");
        kv.put("do_remote_decode", false).put("do_remote_prefill", true).putNull("remote_engine_id")
                .putNull("remote_block_ids").put("transfer_id", transferId).put("remote_dp_size", p.dpSize())
                .put("remote_tp_size", p.tpSize());
        if (prefillRank != null) {
            kv.put("remote_dp_rank", prefillRank);
        }
        return toDecode;
    }

    /** Sends the request to the pair and answers the client once, as {@link ProxyRoutes} does for kvflux's roles. */
    static Publisher<Void> answer(ProxyRoutes.Handlers h, ObjectNode json, CompletionApi api, Pair pair,
            HttpHeaders clientHeaders, String client, HttpServerResponse response) {
        String requestId = requestId(pair.p(), pair.d());
        String transferId = "tx-" + UUID.randomUUID();
        boolean streamed = json.path("stream").asBoolean(false);
        Duration firstByteWithin = h.bounds().firstByteWithin(streamed, api == CompletionApi.CHAT
                ? ChatSchema.maxTokens(json) : CompletionSchema.maxTokens(json));
        String authorization = authorization(clientHeaders);
        ObjectNode toDecode = toDecode(json, transferId, pair.p(), pair.prefillRank());
        AtomicInteger owner = new AtomicInteger(NOBODY);
        boolean read = pair.p().mode() == KvMode.READ;
        AtomicReference<JsonNode> prefillAnswer = new AtomicReference<>();
        Mono<Void> prefillLeg = post(h, pair.prefill(), api, toPrefill(json, transferId, pair.d()), requestId,
                pair.prefillRank(), authorization)
                .responseSingle((status, body) -> body.asByteArray().defaultIfEmpty(new byte[0])
                        .map(bytes -> {
                            String text = new String(bytes, 0, Math.min(bytes.length, MAX_PREFILL_ANSWER_BYTES),
                                    java.nio.charset.StandardCharsets.UTF_8);
                            // a 500 is the instance's own failure (a vLLM instance answers it when its engine
                            // breaks, /health still 200): three in a row eject it as failed requests do
                            h.health().requested(pair.prefill(), status.status().code() != 500);
                            if (status.status().code() != 200) {
                                throw new UpstreamErrors.PrefillFailedException(pair.prefill(), status.status().code(),
                                        text.length() > 4096 ? text.substring(0, 4096) : text);
                            }
                            prefillAnswer.set(parsed(text));
                            return text;
                        }))
                .then()
                .onErrorMap(PoolAcquirePendingLimitException.class, e -> h.overloaded(Role.PREFILL, pair.prefill()))
                .doOnError(e -> !(e instanceof UpstreamErrors.PrefillFailedException
                        || e instanceof UpstreamErrors.OverloadedException), e -> h.health().requested(pair.prefill(),
                        false))
                .onErrorMap(e -> !(e instanceof UpstreamErrors.PrefillFailedException
                        || e instanceof UpstreamErrors.OverloadedException),
                        e -> new UpstreamErrors.PrefillFailedException(pair.prefill(), 0, e.toString()));
        Mono<Void> decodeLeg = Mono.defer(() -> {
            if (read) {
                JsonNode kv = prefillAnswer.get() == null ? null : prefillAnswer.get().path("kv_transfer_params");
                ObjectNode params = (ObjectNode) toDecode.get("kv_transfer_params");
                if (kv != null && kv.isObject()) {
                    params.set("remote_engine_id", kv.path("remote_engine_id"));
                    params.set("remote_block_ids", kv.path("remote_block_ids"));
                    if (kv.path("transfer_id").isTextual()) {
                        params.set("transfer_id", kv.get("transfer_id"));
                    }
                }
            }
            return post(h, pair.decode(), api, toDecode, requestId, null, authorization)
                    .response((status, content) -> {
                        h.health().requested(pair.decode(), true);
                        if (!owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                            return Mono.never();
                        }
                        return h.relay(status, content, pair.decode(), response);
                    })
                    .then();
        })
                .onErrorMap(PoolAcquirePendingLimitException.class, e -> h.overloaded(Role.DECODE, pair.decode()))
                .doOnError(e -> !(e instanceof UpstreamErrors.OverloadedException), e -> {
                    if (e instanceof ReadTimeoutException) {
                        h.canaries().suspect(pair.decode());
                    } else {
                        h.health().requested(pair.decode(), false);
                    }
                })
                .onErrorResume(e -> owner.compareAndSet(NOBODY, DECODE_OWNS) || owner.get() == DECODE_OWNS
                        ? Mono.error(e) : Mono.never());
        // WRITE: prefill's leg runs on its own, as vLLM's proxy runs it: decode's answer ending does not cancel it
        // (its failure before then answers the client), only the client going away does
        reactor.core.publisher.Sinks.One<Throwable> prefillFailure = reactor.core.publisher.Sinks.one();
        reactor.core.Disposable detached = read ? null : prefillLeg.subscribe(null, prefillFailure::tryEmitValue);
        Mono<Void> prefillFailed = (read ? prefillLeg
                : prefillFailure.asMono().flatMap(e -> Mono.<Void>error(e)))
                .onErrorResume(e -> owner.compareAndSet(NOBODY, PREFILL_OWNS) ? Mono.error(e) : Mono.never());
        Mono<Void> firstByte = Mono.delay(firstByteWithin, Schedulers.parallel())
                .then(Mono.defer(() -> owner.compareAndSet(NOBODY, DECODE_OWNS)
                        ? Mono.<Void>error(new UpstreamErrors.FirstByteTimeoutException(pair.decode(), firstByteWithin,
                                streamed))
                        : Mono.<Void>never()))
                .doOnError(e -> h.canaries().suspect(pair.decode()));
        // decode ejected (its health checks failed, a blackhole say) before its answer began: told at once
        Mono<Void> ejected = UpstreamErrors.onEjection(h.health(), pair.decode(),
                () -> owner.compareAndSet(NOBODY, DECODE_OWNS));
        response.header("x-kvflux-transfer-id", transferId);
        // WRITE: both legs at once, prefill's answer only an error's; READ: prefill's answer, then decode's leg
        Mono<Void> legs = read ? prefillFailed.then(Mono.firstWithSignal(decodeLeg, firstByte, ejected))
                : Mono.firstWithSignal(decodeLeg, prefillFailed, firstByte, ejected);
        return legs
                .doOnCancel(() -> {
                    if (detached != null) {
                        detached.dispose();
                    }
                })
                .doOnError(e -> h.upstreamError(UpstreamErrors.upstream(e), UpstreamErrors.reason(e), 1))
                .onErrorResume(error -> {
                    if (!(error instanceof UpstreamErrors.OverloadedException)) {
                        LOG.warn("transfer {} ({}): {}", transferId, requestId, error.getMessage());
                    }
                    if (response.hasSentHeaders()) {
                        return Mono.error(error);
                    }
                    return Mono.from(UpstreamErrors.answer(response, error, pair.decode(), true));
                });
    }

    /**
     * A canary through vLLM decode {@code decode} and a vLLM prefill: a two-token streamed completion, as a
     * client's; what it showed within {@code within}.
     */
    static Mono<InstanceHealth.Canary> canary(ProxyRoutes.Handlers h, Instance decode, Duration within) {
        List<Instance> prefills = candidates(h, Role.PREFILL);
        VllmRegistration d = h.vllm().registration(decode);
        if (prefills.isEmpty() || d == null) {
            return Mono.just(InstanceHealth.Canary.INCONCLUSIVE);
        }
        Instance prefill = prefills.getFirst();
        VllmRegistration p = h.vllm().registration(prefill);
        if (p == null) {
            return Mono.just(InstanceHealth.Canary.INCONCLUSIVE);
        }
        ObjectNode json = HttpJson.MAPPER.createObjectNode().put("prompt", "kvflux canary").put("max_tokens", 2)
                .put("stream", true);
        String requestId = requestId(p, d);
        String transferId = "tx-" + UUID.randomUUID();
        String authorization = authorization(null);
        Mono<Integer> prefillLeg = post(h, prefill, CompletionApi.COMPLETIONS, toPrefill(json, transferId, d),
                requestId, p.dpSize() > 1 ? 0 : null, authorization)
                .responseSingle((status, body) -> body.asByteArray().defaultIfEmpty(new byte[0])
                        .thenReturn(status.status().code()));
        Mono<InstanceHealth.Canary> decodeLeg = post(h, decode, CompletionApi.COMPLETIONS,
                toDecode(json, transferId, p, p.dpSize() > 1 ? 0 : null), requestId, null, authorization)
                .responseSingle((status, body) -> body.asByteArray().defaultIfEmpty(new byte[0])
                        .map(bytes -> status.status().code() == 200 ? InstanceHealth.Canary.HEALTHY
                                : InstanceHealth.Canary.INCONCLUSIVE))
                .onErrorReturn(InstanceHealth.Canary.FAILED);
        Mono<InstanceHealth.Canary> legs = p.mode() == KvMode.READ
                ? prefillLeg.flatMap(code -> code == 200 ? decodeLeg : Mono.just(InstanceHealth.Canary.INCONCLUSIVE))
                .onErrorReturn(InstanceHealth.Canary.INCONCLUSIVE)
                : Mono.firstWithValue(decodeLeg, prefillLeg.filter(code -> code != 200)
                        .map(code -> InstanceHealth.Canary.INCONCLUSIVE).onErrorReturn(InstanceHealth.Canary.INCONCLUSIVE));
        return legs.timeout(within, Mono.just(InstanceHealth.Canary.FAILED), Schedulers.parallel());
    }

    /** What vLLM's instances are sent as the client's credentials: {@code OPENAI_API_KEY} if set, else the client's. */
    private static String authorization(HttpHeaders clientHeaders) {
        String key = System.getenv("OPENAI_API_KEY");
        if (key != null && !key.isEmpty()) {
            return "Bearer " + key;
        }
        return clientHeaders == null ? null : clientHeaders.get(HttpHeaderNames.AUTHORIZATION);
    }

    private static HttpClient.ResponseReceiver<?> post(ProxyRoutes.Handlers h, Instance instance, CompletionApi api,
            ObjectNode body, String requestId, Integer dpRank, String authorization) {
        byte[] bytes = HttpJson.bytes(body);
        return h.client().headers(headers -> {
                    headers.set(HttpHeaderNames.CONTENT_TYPE, "application/json");
                    headers.set("X-Request-Id", requestId);
                    if (authorization != null) {
                        headers.set(HttpHeaderNames.AUTHORIZATION, authorization);
                    }
                    if (dpRank != null) {
                        headers.set("X-data-parallel-rank", Integer.toString(dpRank));
                    }
                })
                .post().uri(instance.baseUrl() + api.path())
                .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(bytes)));
    }

    private static JsonNode parsed(String text) {
        try {
            JsonNode node = HttpJson.MAPPER.readTree(text);
            return node == null ? HttpJson.MAPPER.missingNode() : node;
        } catch (java.io.IOException | RuntimeException e) {
            return HttpJson.MAPPER.missingNode();
        }
    }
}
