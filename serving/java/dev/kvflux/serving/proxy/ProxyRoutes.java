package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.ChatSchema;
import dev.kvflux.serving.api.CompletionApi;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.BodyReader;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.serving.observe.Step;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.notify.LogText;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.Kind;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.timeout.ReadTimeoutException;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.publisher.SignalType;
import reactor.core.scheduler.Schedulers;
import reactor.netty.ByteBufFlux;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.client.HttpClientResponse;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;
import reactor.netty.internal.shaded.reactor.pool.PoolAcquirePendingLimitException;

/**
 * The proxy's completions route: {@code POST /v1/completions}, split between a prefill and a decode instance, one
 * answer per request; see {@link ProxyServer} for what it answers. Decode's streamed answers are watched
 * ({@link StreamWatch}), so a decode whose streams stop is ejected and its streams end with the reason; a request that
 * runs past its deadline asks for a canary ({@link Canaries}) instead of counting against its decode.
 */
final class ProxyRoutes {
    /** The proxy's own logger: its lines read as the proxy's, whichever file holds the code. */
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    private ProxyRoutes() {
    }

    /** The most bytes of an instance's error answer the proxy reads; messages quote far less. */
    private static final int MAX_ANSWER_HEAD_BYTES = 4096;
    /** Who answers a client's request: nobody yet, decode (its answer is streaming) or prefill's failure. */
    private static final int NOBODY = 0;
    private static final int DECODE_OWNS = 1;
    private static final int PREFILL_OWNS = 2;
    /** How long prefill's 409 (decode aborted the transfer) gives decode's own answer to arrive first. */
    private static final long DECODE_FIRST_GRACE_MILLIS = 500;
    /** How long the proxy holds its own 429 for a client at its cap before it answers. */
    static final long OVER_CAP_HOLD_MILLIS = 500;

    /**
     * The time bounds of a completion's legs.
     *
     * @param firstByteTimeout how long decode may take to start its answer: a streamed one's first byte
     * @param tokenTimeout how much longer a non-streamed answer may take per token of its {@code max_tokens} (the
     *     proxy's upstream timeout, on the silence of any answer, still bounds it)
     */
    record Bounds(Duration firstByteTimeout, Duration tokenTimeout) {
        /** How long decode may take to start the answer of a request of {@code maxTokens}, streamed or not. */
        Duration firstByteWithin(boolean streamed, int maxTokens) {
            return streamed ? firstByteTimeout : firstByteTimeout.plus(tokenTimeout.multipliedBy(maxTokens));
        }
    }

    record Handlers(InstanceRegistry registry, HttpClient client, int maxConnections, int maxPending,
                    AtomicBoolean warnedOverloaded, RequestAuth requestAuth, RoleMetrics meters,
                    ObservationRegistry observations, InstanceHealth health, Bounds bounds, int maxModelLen,
                    ClientKeys clientKeys, StreamWatch streams, Canaries canaries, VllmInstances vllm,
                    ClientCaps caps, Handover handover, FirstToken firstToken, ProxyAdmission admission) {

        Publisher<Void> completions(HttpServerRequest request, HttpServerResponse response) {
            return serve(request, response, CompletionApi.COMPLETIONS);
        }

        Publisher<Void> chat(HttpServerRequest request, HttpServerResponse response) {
            return serve(request, response, CompletionApi.CHAT);
        }

        private Publisher<Void> serve(HttpServerRequest request, HttpServerResponse response, CompletionApi api) {
            long start = System.nanoTime();
            String client = clientKeys.of(request.requestHeaders(), request.remoteAddress());
            int cap = caps.tryStart(client);
            if (cap >= 0) {
                return overCap(response, cap).doFinally(signal -> meters.counter("kvflux.proxy.client.refusals",
                        "Requests the proxy refused itself because their client is at its cap").increment());
            }
            return Mono.from(HttpJson.withUtf8Buffer(request, response, CompletionSchema.arriving(maxModelLen),
                            body -> route(body, request.requestHeaders(), client, response, api, start)))
                    .doFinally(signal -> caps.ended(client,
                            response.status().code() == HttpResponseStatus.TOO_MANY_REQUESTS.code()))
                    .doFinally(signal -> meters.timer("kvflux.proxy.requests",
                                    "Completions from their arrival to the end of their answer, by HTTP status",
                                    "status", signal == SignalType.CANCEL ? "cancelled"
                                            : Integer.toString(response.status().code()))
                            .record(System.nanoTime() - start, java.util.concurrent.TimeUnit.NANOSECONDS));
        }

        /**
         * 429 {@code client_over_share} from the proxy itself, its body unread: the client is at its cap
         * ({@link ClientCaps}). The answer comes {@value #OVER_CAP_HOLD_MILLIS} ms later, so that a client that sends
         * again at once does not spin on refusals.
         */
        private static Mono<Void> overCap(HttpServerResponse response, int cap) {
            BodyReader.lingerThenClose(response);
            return Mono.delay(Duration.ofMillis(OVER_CAP_HOLD_MILLIS)).then(Mono.from(HttpJson.error(
                    response.header(HttpHeaderNames.RETRY_AFTER, "1"), HttpResponseStatus.TOO_MANY_REQUESTS,
                    "rate_limit_error", "client_over_share", "this client already has " + cap + " requests in flight,"
                            + " as many as its share of the instances' KV blocks or prefill queue let in (the roles'"
                            + " --client-share); retry when one of them has ended")));
        }

        /** Counts {@code n} failures of an instance behind the proxy; {@code reason} is one of a fixed few. */
        void upstreamError(Role upstream, String reason, int n) {
            meters.counter("kvflux.proxy.upstream.errors", "Failures of the instances behind the proxy, by reason",
                    "upstream", upstream.wireName(), "reason", reason).increment(n);
        }

        private Publisher<Void> route(io.netty.buffer.ByteBuf body, HttpHeaders headers, String client, HttpServerResponse response,
                CompletionApi api, long arrived) {
            ObjectNode json;
            try {
                ObjectNode parsed = CompletionSchema.parse(body, maxModelLen);
                json = api == CompletionApi.CHAT ? ChatSchema.check(parsed, maxModelLen)
                        : CompletionSchema.check(parsed, maxModelLen);
            } catch (CompletionSchema.ModelLengthException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "context_length_exceeded", e.getMessage());
            } catch (IllegalArgumentException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "invalid_request", e.getMessage());
            }
            java.util.function.Predicate<Instance> ours = instance -> !vllm.isVllm(instance);
            Optional<Instance> prefill = registry.pick(Role.PREFILL, ours, health::usable);
            Optional<Instance> decode = registry.pick(Role.DECODE, ours, health::usable);
            if (prefill.isEmpty() || decode.isEmpty()) {
                VllmLegs.Pair pair = VllmLegs.choose(this);
                if (pair != null) {
                    return VllmLegs.answer(this, json, api, pair, headers, client, response);
                }
                String missing = prefill.isEmpty() ? "prefill" : "decode";
                return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                        "no_" + missing, "no " + missing + " instance is registered; start one with `kvflux "
                                + missing + "` pointed at this proxy");
            }
            String transferId = "kvflux-" + UUID.randomUUID();
            Observation span = Spans.server(observations, "kvflux.proxy.completion", transferId, headers);
            Observation prefillCall = Spans.sent(observations, "kvflux.proxy.prefill", transferId, span, Kind.CLIENT);
            Observation decodeCall = Spans.sent(observations, "kvflux.proxy.decode", transferId, span, Kind.CLIENT);
            Handover.Marks marks = handover.begin(transferId);
            marks.reached(Handover.Stage.PROXY_IN, arrived);
            Mono<Void> answered = admission.around(() -> answer(json, api, transferId, client, prefill.get(),
                    decode.get(), response, prefillCall, decodeCall, marks), response, meters);
            return answered
                    .doOnError(span::error)
                    .doFinally(signal -> span.stop())
                    .contextWrite(LogContext.context(transferId, Spans.traceId(span)));
        }

        /** The request to prefill: one token, not streamed, naming decode's notify addresses. */
        static ObjectNode toPrefill(ObjectNode json, String transferId, Instance decode) {
            return oneToken(new KvTransferParams(transferId, Role.DECODE, decode.notifyRanks()).into(json.deepCopy()));
        }

        /** {@code request} made prefill's: one token ({@code max_completion_tokens} too, where given), not streamed. */
        static ObjectNode oneToken(ObjectNode request) {
            request.put("max_tokens", 1);
            if (request.has("max_completion_tokens")) {
                request.put("max_completion_tokens", 1);
            }
            request.put("stream", false);
            request.remove("stream_options");
            return request;
        }

        /** The request to decode: the client's, naming prefill's notify addresses. */
        static ObjectNode toDecode(ObjectNode json, String transferId, Instance prefill) {
            return new KvTransferParams(transferId, Role.PREFILL, prefill.notifyRanks()).into(json.deepCopy());
        }

        /**
         * Prefill's leg: it completes empty when prefill answers 200 (its answer is dropped), and fails with a
         * {@link UpstreamErrors.PrefillFailedException} when prefill refuses, fails or cannot be reached.
         */
        private Mono<Void> prefillLeg(Instance prefill, ObjectNode toPrefill, String transferId, String traceparent,
                String clientKey, Step step, CompletionApi api) {
            return prefillAnswer(prefill, toPrefill, transferId, traceparent, clientKey, step, api).then();
        }

        /** As {@link #prefillLeg}, emitting prefill's 200 answer (its first {@value #MAX_ANSWER_HEAD_BYTES} bytes). */
        Mono<String> prefillAnswer(Instance prefill, ObjectNode toPrefill, String transferId, String traceparent,
                String clientKey, Step step, CompletionApi api) {
            return post(prefill, toPrefill, transferId, traceparent, clientKey, api)
                    .response((status, content) -> head(content)
                            .doOnNext(text -> {
                                health.requested(prefill, true);
                                if (status.status().code() == 200) {
                                    step.stop();
                                }
                            })
                            .flatMap(text -> status.status().code() == 200
                                    ? Mono.just(text)
                                    : failure(status.status().code(), Mono.<String>error(
                                            new UpstreamErrors.PrefillFailedException(prefill, status.status().code(),
                                                    text)))))
                    // to the exchange's end, never cancelling it: a cancelled exchange's connection is closed
                    .singleOrEmpty()
                    .onErrorMap(PoolAcquirePendingLimitException.class, e -> overloaded(Role.PREFILL, prefill))
                    .doOnError(e -> !isRefusal(e), e -> health.requested(prefill, false))
                    .onErrorMap(e -> !isRefusal(e), e -> new UpstreamErrors.PrefillFailedException(prefill, 0,
                            e.toString()));
        }

        private static boolean isRefusal(Throwable e) {
            return e instanceof UpstreamErrors.PrefillFailedException || e instanceof UpstreamErrors.OverloadedException;
        }

        /** Sends the request to both instances and answers the client once, from whichever side owns it. */
        private Mono<Void> answer(ObjectNode json, CompletionApi api, String transferId, String client,
                Instance prefill, Instance decode, HttpServerResponse response, Observation prefillCall,
                Observation decodeCall, Handover.Marks marks) {
            boolean streamed = json.path("stream").asBoolean(false);
            int maxTokens = api == CompletionApi.CHAT ? ChatSchema.maxTokens(json) : CompletionSchema.maxTokens(json);
            Duration firstByteWithin = bounds.firstByteWithin(streamed, maxTokens);
            response.header("x-kvflux-transfer-id", transferId);
            if (PrefillFirstToken.applies(firstToken, streamed, maxTokens)) {
                PrefillFirstToken.Answer viaPrefill = PrefillFirstToken.answer(this, json, api, transferId, client,
                        prefill, decode, response, prefillCall, decodeCall, marks, firstByteWithin);
                return settle(viaPrefill.answered(), viaPrefill.exchanges(), transferId, decode, response);
            }
            // Exactly one side answers the client: decode, once its answer's headers arrive, or prefill's
            // failure, if it comes first. Whichever claims the response first owns it; the other's outcome is
            // only logged, so the two answers never race on one response.
            AtomicInteger owner = new AtomicInteger(NOBODY);
            // Prefill's answer only matters when it is an error: then the KV will never come, and decode's
            // request is cancelled at once instead of waiting for its receive deadline.
            // the prefill call's span ends when prefill has answered, not when the request ends
            Step prefillStep = Step.of(prefillCall);
            Mono<Void> prefillExchange = prefillLeg(prefill, toPrefill(json, transferId, decode), transferId,
                    Spans.traceparent(prefillCall), client, prefillStep, api)
                    .doOnSuccess(v -> marks.reached(Handover.Stage.PREFILL_ANSWERED))
                    .doOnError(prefillStep::fail)
                    .doFinally(signal -> prefillStep.stop());
            // Prefill's exchange runs on its own: decode's answer ending well does not cancel it; the client going
            // away or the request failing does (prefill then stops the transfer). Cancelling an exchange whose answer
            // is arriving closes its connection, which the pool may already have handed to the next request: that
            // request then failed with "Connection prematurely closed BEFORE response" from a healthy prefill.
            Sinks.One<Throwable> prefillFailure = Sinks.one();
            Disposable.Swap detached = Disposables.swap();
            Mono<Void> prefillFailed = Mono.deferContextual(context -> {
                        // started with the request's context, so that its logs still name the transfer
                        detached.update(prefillExchange.contextWrite(context)
                                .subscribe(null, prefillFailure::tryEmitValue));
                        return prefillFailure.asMono();
                    })
                    .flatMap(e -> Mono.<Void>error(e))
                    .onErrorResume(e -> {
                        if (owner.compareAndSet(NOBODY, PREFILL_OWNS)) {
                            return Mono.error(e);
                        }
                        LOG.warn("transfer {}: {} after decode's answer had started; decode's answer stands",
                                transferId, e.getMessage());
                        return Mono.never();
                    });

            Mono<Void> decoded = post(decode, toDecode(json, transferId, prefill), transferId,
                    Spans.traceparent(decodeCall), client, api)
                    .response((status, content) -> {
                        health.requested(decode, true);
                        if (!owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                            return Mono.never();
                        }
                        return relay(status, content, decode, response,
                                () -> marks.reached(Handover.Stage.CLIENT_FIRST_BYTE));
                    })
                    .then()
                    .onErrorMap(PoolAcquirePendingLimitException.class, e -> overloaded(Role.DECODE, decode))
                    .doOnError(e -> !(e instanceof UpstreamErrors.OverloadedException), e -> {
                        if (e instanceof ReadTimeoutException) {
                            canaries.suspect(decode); // a slow answer is not a dead decode: a canary decides
                        } else {
                            health.requested(decode, false);
                        }
                    })
                    .doOnError(decodeCall::error)
                    .doFinally(signal -> decodeCall.stop())
                    .onErrorResume(e -> owner.compareAndSet(NOBODY, DECODE_OWNS) || owner.get() == DECODE_OWNS
                            ? Mono.error(e) : Mono.never());
            // decode's first byte is bounded far below the upstream timeout: a decode that holds requests and never
            // answers fails them in a minute, not ten; whether it is to blame, a canary through it decides
            Mono<Void> firstByte = Mono.delay(firstByteWithin, Schedulers.parallel())
                    .then(Mono.defer(() -> owner.compareAndSet(NOBODY, DECODE_OWNS)
                            ? Mono.<Void>error(new UpstreamErrors.FirstByteTimeoutException(decode, firstByteWithin,
                                    streamed))
                            : Mono.<Void>never()))
                    .doOnError(e -> canaries.suspect(decode));
            // decode ejected (its health checks failed, a blackhole say) before its answer began: told at once
            Mono<Void> ejected = UpstreamErrors.onEjection(health, decode,
                    () -> owner.compareAndSet(NOBODY, DECODE_OWNS));
            return settle(Mono.firstWithSignal(decoded, prefillFailed, firstByte, ejected), detached, transferId, decode,
                    response);
        }

        /**
         * The request's answer once {@code answered} ends: on a failure, the exchanges still running are stopped, the
         * failure is counted and logged, and answered as an error if nothing was sent yet.
         */
        private Mono<Void> settle(Mono<Void> answered, Disposable detached, String transferId, Instance decode,
                HttpServerResponse response) {
            return answered
                    .doOnCancel(detached::dispose)
                    .doOnError(e -> detached.dispose())
                    .doOnError(e -> upstreamError(UpstreamErrors.upstream(e), UpstreamErrors.reason(e), 1))
                    .onErrorResume(error -> {
                        if (!(error instanceof UpstreamErrors.OverloadedException)) {
                            LOG.warn("transfer {}: {}", transferId, error.getMessage());
                        }
                        if (response.hasSentHeaders()) {
                            return Mono.error(error);
                        }
                        return Mono.from(UpstreamErrors.answer(response, error, decode, requestAuth != null));
                    });
        }

        /**
         * Sends decode's answer on to the client: status, content type and body as decode sent them. A streamed answer
         * (server-sent events) is watched: when its decode stalls, it ends with an error event naming why.
         */
        Mono<Void> relay(HttpClientResponse status, ByteBufFlux content, Instance decode,
                HttpServerResponse response) {
            return relay(status, content, decode, response, () -> { });
        }

        /** As {@link #relay(HttpClientResponse, ByteBufFlux, Instance, HttpServerResponse)}, running {@code firstByte} as
         * decode's first bytes are passed on. */
        Mono<Void> relay(HttpClientResponse status, ByteBufFlux content, Instance decode,
                HttpServerResponse response, Runnable firstByte) {
            if (status.status().code() == HttpResponseStatus.UNAUTHORIZED.code() && requestAuth == null) {
                return head(content).then(Mono.from(UpstreamErrors.unsignedProxy(response, "decode")));
            }
            response.status(status.status());
            String type = status.responseHeaders().get(HttpHeaderNames.CONTENT_TYPE);
            if (type != null) {
                response.header(HttpHeaderNames.CONTENT_TYPE, type);
            }
            AtomicBoolean started = new AtomicBoolean();
            Flux<ByteBuf> passed = content.retain().doOnNext(buf -> {
                if (!started.getAndSet(true)) {
                    firstByte.run();
                }
            });
            if (type == null || !type.startsWith("text/event-stream")) {
                return response.send(passed, buf -> true).then();
            }
            StreamWatch.Stream watched = streams.start(decode);
            Flux<ByteBuf> body = passed.doOnNext(buf -> watched.progressed())
                    .takeUntilOther(watched.aborted());
            Mono<ByteBuf> tail = Mono.fromSupplier(watched::abortReason).map(why -> {
                upstreamError(Role.DECODE, "stalled", 1);
                LOG.warn("{}", why);
                return Unpooled.wrappedBuffer(errorEvent(why));
            });
            return response.send(body.concatWith(tail), buf -> true).then().doFinally(signal -> watched.ended());
        }

        /** The server-sent events that end a stream whose decode stalled: an OpenAI-style error, then [DONE]. */
        static byte[] errorEvent(String why) {
            return ("data: " + HttpJson.write(HttpJson.errorBody("upstream_error", "decode_stalled", why))
                    + "\n\ndata: [DONE]\n\n").getBytes(StandardCharsets.UTF_8);
        }

        /**
         * A canary through {@code decode} and any usable prefill: a small streamed completion, as a client's; what it
         * showed within {@code within} ({@link InstanceHealth.Canary}).
         */
        Mono<InstanceHealth.Canary> canary(Instance decode, Duration within) {
            if (vllm.isVllm(decode)) {
                return VllmLegs.canary(this, decode, within);
            }
            Optional<Instance> prefill = registry.pick(Role.PREFILL, instance -> !vllm.isVllm(instance),
                    health::usable);
            if (prefill.isEmpty()) {
                return Mono.just(InstanceHealth.Canary.INCONCLUSIVE);
            }
            String transferId = "kvflux-canary-" + UUID.randomUUID();
            ObjectNode json = HttpJson.MAPPER.createObjectNode().put("prompt", "kvflux canary").put("max_tokens", 2)
                    .put("stream", true);
            Mono<InstanceHealth.Canary> prefillRefused = prefillLeg(prefill.get(), toPrefill(json, transferId, decode),
                    transferId, null, "", Step.NONE, CompletionApi.COMPLETIONS)
                    .then(Mono.<InstanceHealth.Canary>empty())
                    .onErrorReturn(InstanceHealth.Canary.INCONCLUSIVE);
            Mono<InstanceHealth.Canary> decoded = post(decode, toDecode(json, transferId, prefill.get()), transferId,
                    null, "", CompletionApi.COMPLETIONS)
                    .responseSingle((status, body) -> body.asByteArray().map(bytes -> bytes.length)
                            .defaultIfEmpty(0).map(n -> status.status().code() == 200 ? InstanceHealth.Canary.HEALTHY
                                    : InstanceHealth.Canary.INCONCLUSIVE))
                    .onErrorReturn(InstanceHealth.Canary.FAILED);
            return Mono.firstWithValue(decoded, prefillRefused)
                    .timeout(within, Mono.just(InstanceHealth.Canary.FAILED), Schedulers.parallel());
        }

        /**
         * Prefill's failure as it is to reach the client: at once, unless prefill answered 409 because decode aborted
         * the transfer; then decode refused first and its answer (with decode's reason) is on its way, so prefill's
         * waits {@value #DECODE_FIRST_GRACE_MILLIS} ms for it to take the response.
         */
        static <T> Mono<T> failure(int status, Mono<T> failed) {
            return status == HttpResponseStatus.CONFLICT.code()
                    ? Mono.delay(Duration.ofMillis(DECODE_FIRST_GRACE_MILLIS), Schedulers.parallel()).then(failed)
                    : failed;
        }

        /**
         * The first {@value #MAX_ANSWER_HEAD_BYTES} bytes of an instance's answer as text (empty if it has
         * none); the rest is not read, so an instance's endless or huge body is never held in memory.
         */
        static Mono<String> head(ByteBufFlux content) {
            AtomicInteger seen = new AtomicInteger();
            return content.asByteArray()
                    .takeUntil(chunk -> seen.addAndGet(chunk.length) >= MAX_ANSWER_HEAD_BYTES)
                    .collect(ByteArrayOutputStream::new, (out, chunk) -> out.write(chunk, 0,
                            Math.min(chunk.length, MAX_ANSWER_HEAD_BYTES - out.size())))
                    .map(out -> out.toString(StandardCharsets.UTF_8));
        }

        /** The request's refusal; the first is logged as a warning, later ones at debug level. */
        UpstreamErrors.OverloadedException overloaded(Role role, Instance instance) {
            UpstreamErrors.OverloadedException e = new UpstreamErrors.OverloadedException(role, instance,
                    maxConnections, maxPending);
            if (warnedOverloaded.compareAndSet(false, true)) {
                LOG.warn("{}. Requests are refused with 503 while this lasts; later refusals are logged at debug"
                        + " level", e.getMessage());
            } else {
                LOG.debug("{}", e.getMessage());
            }
            return e;
        }

        /**
         * POSTs {@code body} to the instance, signed for {@code transferId} and the instance when the proxy has a
         * secret, naming the client by {@code clientKey} (none when empty), with the {@code traceparent} header unless
         * it is null.
         */
        HttpClient.ResponseReceiver<?> post(Instance instance, ObjectNode body, String transferId,
                String traceparent, String clientKey, CompletionApi api) {
            byte[] bytes = HttpJson.bytes(body);
            return client.headers(h -> {
                        h.set(HttpHeaderNames.CONTENT_TYPE, "application/json");
                        if (traceparent != null) {
                            h.set(Spans.TRACEPARENT, traceparent);
                        }
                        if (!clientKey.isEmpty()) {
                            h.set(RequestAuth.CLIENT_HEADER, clientKey);
                        }
                        if (requestAuth != null) {
                            requestAuth.sign(h, "POST", api.path(), transferId,
                                    Instance.hostPort(instance.httpAddress()), clientKey, bytes);
                        }
                    })
                    .post().uri(instance.baseUrl() + api.path())
                    .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(bytes)));
        }
    }
}
