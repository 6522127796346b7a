package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.serving.observe.Step;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.notify.LogText;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.Kind;
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
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.core.scheduler.Schedulers;
import reactor.netty.ByteBufFlux;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;
import reactor.netty.internal.shaded.reactor.pool.PoolAcquirePendingLimitException;

/**
 * The proxy's routes: {@code POST /v1/completions} (split between a prefill and a decode instance, one answer per
 * request), {@code POST /register} and {@code GET /health}; see {@link ProxyServer} for what each does.
 */
final class ProxyRoutes {
    /** The proxy's own logger: its lines read as the proxy's, whichever file holds the code. */
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    private ProxyRoutes() {
    }

    /** Prefill could not be reached or answered with an error, so the request's KV will never come. */
    private static final class PrefillFailedException extends RuntimeException {
        private final boolean overloaded;

        PrefillFailedException(Instance prefill, String what) {
            this(prefill, what, false);
        }

        PrefillFailedException(Instance prefill, String what, boolean overloaded) {
            super("prefill instance " + prefill.baseUrl() + (overloaded ? " is overloaded: " : " failed: ") + what,
                    null, false, false);
            this.overloaded = overloaded;
        }
    }

    /** Decode sent nothing within the first-byte bound: it holds the request without answering. */
    private static final class FirstByteTimeoutException extends RuntimeException {
        FirstByteTimeoutException(Instance decode, Duration within) {
            super("decode instance " + decode.baseUrl() + " sent no answer within the proxy's first-byte timeout of "
                    + within.toSeconds() + " s; check that it is alive and runs with a receive deadline", null, false,
                    false);
        }
    }

    /** Too many requests already wait for a connection to an instance; the request was not sent. */
    private static final class OverloadedException extends RuntimeException {
        private final Role role;

        OverloadedException(Role role, Instance instance, int connections, int pending) {
            super("the proxy is overloaded: " + connections + " requests are open to " + role.wireName()
                    + " instance " + instance.baseUrl() + " and " + pending + " more wait for a connection to it;"
                    + " retry later, or lower the client's concurrency", null, false, false);
            this.role = role;
        }
    }

    /** The largest registration body read: a registration is three short strings. */
    static final int MAX_REGISTRATION_BYTES = 4096;

    /** Who answers a client's request: nobody yet, decode (its answer is streaming) or prefill's failure. */
    /** The most bytes of an instance's error answer the proxy reads; messages quote far less. */
    private static final int MAX_ANSWER_HEAD_BYTES = 4096;
    private static final int NOBODY = 0;
    private static final int DECODE_OWNS = 1;
    private static final int PREFILL_OWNS = 2;
    /** How long prefill's 409 (decode aborted the transfer) gives decode's own answer to arrive first. */
    private static final long DECODE_FIRST_GRACE_MILLIS = 500;
    /** The roles' completions path, as the proxy signs it. */
    private static final String COMPLETIONS = "/v1/completions";

    record Handlers(InstanceRegistry registry, HttpClient client, int maxConnections, int maxPending,
                            AtomicBoolean warnedOverloaded, RegistrationAuth registrationAuth,
                            RequestAuth requestAuth, AtomicBoolean warnedRefusedRegistration, RoleMetrics meters,
                            ObservationRegistry observations, InstanceHealth health, Duration firstByteTimeout,
                            int maxModelLen, EtcdMembers members) {

        Publisher<Void> completions(HttpServerRequest request, HttpServerResponse response) {
            long start = System.nanoTime();
            return Mono.from(HttpJson.withBody(request, response,
                            body -> route(body, request.requestHeaders(), response)))
                    .doFinally(signal -> meters.timer("kvflux.proxy.requests",
                                    "Completions from their arrival to the end of their answer, by HTTP status",
                                    "status", signal == SignalType.CANCEL ? "cancelled"
                                            : Integer.toString(response.status().code()))
                            .record(System.nanoTime() - start, java.util.concurrent.TimeUnit.NANOSECONDS));
        }

        /** Counts {@code n} failures of an instance behind the proxy; {@code reason} is one of a fixed few. */
        void upstreamError(Role upstream, String reason, int n) {
            meters.counter("kvflux.proxy.upstream.errors", "Failures of the instances behind the proxy, by reason",
                    "upstream", upstream.wireName(), "reason", reason).increment(n);
        }

        private Publisher<Void> route(String body, HttpHeaders headers, HttpServerResponse response) {
            ObjectNode json;
            try {
                json = CompletionSchema.check(HttpJson.object(body), maxModelLen);
            } catch (CompletionSchema.ModelLengthException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "context_length_exceeded", e.getMessage());
            } catch (IllegalArgumentException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "invalid_request", e.getMessage());
            }
            Optional<Instance> prefill = registry.pick(Role.PREFILL, health::usable);
            Optional<Instance> decode = registry.pick(Role.DECODE, health::usable);
            if (prefill.isEmpty() || decode.isEmpty()) {
                String missing = prefill.isEmpty() ? "prefill" : "decode";
                return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                        "no_" + missing, "no " + missing + " instance is registered; start one with `kvflux "
                                + missing + "` pointed at this proxy");
            }
            String transferId = "kvflux-" + UUID.randomUUID();
            Observation span = Spans.server(observations, "kvflux.proxy.completion", transferId, headers);
            Observation prefillCall = Spans.sent(observations, "kvflux.proxy.prefill", transferId, span, Kind.CLIENT);
            Observation decodeCall = Spans.sent(observations, "kvflux.proxy.decode", transferId, span, Kind.CLIENT);
            return answer(json, transferId, prefill.get(), decode.get(), response, prefillCall, decodeCall)
                    .doOnError(span::error)
                    .doFinally(signal -> span.stop())
                    .contextWrite(LogContext.context(transferId, Spans.traceId(span)));
        }

        /** Sends the request to both instances and answers the client once, from whichever side owns it. */
        private Mono<Void> answer(ObjectNode json, String transferId, Instance prefill, Instance decode,
                HttpServerResponse response, Observation prefillCall, Observation decodeCall) {
            ObjectNode toPrefill = new KvTransferParams(transferId, Role.DECODE, decode.notifyRanks())
                    .into(json.deepCopy());
            toPrefill.put("max_tokens", 1);
            toPrefill.put("stream", false);
            toPrefill.remove("stream_options");
            ObjectNode toDecode = new KvTransferParams(transferId, Role.PREFILL, prefill.notifyRanks())
                    .into(json.deepCopy());

            // Exactly one side answers the client: decode, once its answer's headers arrive, or prefill's
            // failure, if it comes first. Whichever claims the response first owns it; the other's outcome is
            // only logged, so the two answers never race on one response.
            AtomicInteger owner = new AtomicInteger(NOBODY);
            // Prefill's answer only matters when it is an error: then the KV will never come, and decode's
            // request is cancelled at once instead of waiting for its receive deadline.
            // the prefill call's span ends when prefill has answered, not when the request ends
            Step prefillStep = Step.of(prefillCall);
            Mono<Void> prefillFailed = post(prefill, toPrefill, transferId, Spans.traceparent(prefillCall))
                    .response((status, content) -> head(content)
                            .doOnNext(text -> {
                                health.requested(prefill, true);
                                if (status.status().code() == 200) {
                                    prefillStep.stop();
                                }
                            })
                            .flatMap(text -> status.status().code() == 200
                                    ? Mono.<Void>never()
                                    : failure(status.status().code(), Mono.<Void>error(new PrefillFailedException(prefill,
                                            status.status().code() + " " + LogText.escape(text),
                                            status.status().code() == HttpResponseStatus.SERVICE_UNAVAILABLE.code())))))
                    .then()
                    .onErrorMap(PoolAcquirePendingLimitException.class, e -> overloaded(Role.PREFILL, prefill))
                    .doOnError(e -> !(e instanceof PrefillFailedException || e instanceof OverloadedException),
                            e -> health.requested(prefill, false))
                    .onErrorMap(e -> !(e instanceof PrefillFailedException || e instanceof OverloadedException),
                            e -> new PrefillFailedException(prefill, e.toString()))
                    .doOnError(prefillStep::fail)
                    .doFinally(signal -> prefillStep.stop())
                    .onErrorResume(e -> {
                        if (owner.compareAndSet(NOBODY, PREFILL_OWNS)) {
                            return Mono.error(e);
                        }
                        LOG.warn("transfer {}: {} after decode's answer had started; decode's answer stands",
                                transferId, e.getMessage());
                        return Mono.never();
                    });

            response.header("x-kvflux-transfer-id", transferId);
            Mono<Void> decoded = post(decode, toDecode, transferId, Spans.traceparent(decodeCall))
                    .response((status, content) -> {
                        health.requested(decode, true);
                        if (!owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                            return Mono.never();
                        }
                        response.status(status.status());
                        String type = status.responseHeaders().get(HttpHeaderNames.CONTENT_TYPE);
                        if (type != null) {
                            response.header(HttpHeaderNames.CONTENT_TYPE, type);
                        }
                        return response.send(content.retain(), buf -> true).then();
                    })
                    .then()
                    .onErrorMap(PoolAcquirePendingLimitException.class, e -> overloaded(Role.DECODE, decode))
                    .doOnError(e -> !(e instanceof OverloadedException), e -> health.requested(decode, false))
                    .doOnError(decodeCall::error)
                    .doFinally(signal -> decodeCall.stop())
                    .onErrorResume(e -> owner.compareAndSet(NOBODY, DECODE_OWNS) || owner.get() == DECODE_OWNS
                            ? Mono.error(e) : Mono.never());
            // decode's first byte is bounded far below the upstream timeout: a decode that holds requests and never
            // answers fails them in a minute, not ten, and is ejected
            Mono<Void> firstByte = Mono.delay(firstByteTimeout, Schedulers.parallel())
                    .then(Mono.defer(() -> owner.compareAndSet(NOBODY, DECODE_OWNS)
                            ? Mono.<Void>error(new FirstByteTimeoutException(decode, firstByteTimeout))
                            : Mono.<Void>never()))
                    .doOnError(e -> health.requested(decode, false));
            return Mono.firstWithSignal(decoded, prefillFailed, firstByte)
                    .doOnError(this::countUpstreamError)
                    .onErrorResume(error -> {
                        if (error instanceof PrefillFailedException) {
                            LOG.warn("transfer {}: {}", transferId, error.getMessage());
                        }
                        if (response.hasSentHeaders()) {
                            return Mono.error(error);
                        }
                        if (error instanceof OverloadedException) {
                            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE,
                                    "overloaded", "proxy_overloaded", error.getMessage()));
                        }
                        if (error instanceof PrefillFailedException failed && failed.overloaded) {
                            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE,
                                    "overloaded", "prefill_overloaded", error.getMessage()
                                            + "; retry later, or lower the client's concurrency"));
                        }
                        if (error instanceof PrefillFailedException) {
                            return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error",
                                    "prefill_failed", error.getMessage()));
                        }
                        if (error instanceof FirstByteTimeoutException) {
                            LOG.warn("transfer {}: {}", transferId, error.getMessage());
                            return Mono.from(HttpJson.error(response, HttpResponseStatus.GATEWAY_TIMEOUT,
                                    "upstream_error", "upstream_timeout", error.getMessage()));
                        }
                        if (error instanceof ReadTimeoutException) {
                            LOG.warn("transfer {}: decode instance {} sent nothing for the upstream timeout", transferId,
                                    decode.baseUrl());
                            return Mono.from(HttpJson.error(response, HttpResponseStatus.GATEWAY_TIMEOUT,
                                    "upstream_error", "upstream_timeout", "decode instance " + decode.baseUrl()
                                            + " sent nothing within the proxy's upstream timeout; check that it is"
                                            + " alive and runs with a receive deadline"));
                        }
                        return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error",
                                "decode_unreachable", "decode instance " + decode.baseUrl()
                                        + " did not answer: " + (error.getMessage() != null ? error.getMessage()
                                                : error.getClass().getSimpleName())));
                    });
        }

        /**
         * Prefill's failure as it is to reach the client: at once, unless prefill answered 409 because decode aborted
         * the transfer; then decode refused first and its answer (with decode's reason) is on its way, so prefill's
         * waits {@value #DECODE_FIRST_GRACE_MILLIS} ms for it to take the response.
         */
        private static Mono<Void> failure(int status, Mono<Void> failed) {
            return status == HttpResponseStatus.CONFLICT.code()
                    ? Mono.delay(Duration.ofMillis(DECODE_FIRST_GRACE_MILLIS), Schedulers.parallel()).then(failed)
                    : failed;
        }

        private void countUpstreamError(Throwable error) {
            switch (error) {
                case OverloadedException overloaded -> upstreamError(overloaded.role, "pool_full", 1);
                case PrefillFailedException failed -> upstreamError(Role.PREFILL, failed.overloaded ? "overloaded"
                        : "failed", 1);
                case ReadTimeoutException timeout -> upstreamError(Role.DECODE, "timeout", 1);
                case FirstByteTimeoutException timeout -> upstreamError(Role.DECODE, "timeout", 1);
                default -> upstreamError(Role.DECODE, "unreachable", 1);
            }
        }

        /**
         * The first {@value #MAX_ANSWER_HEAD_BYTES} bytes of an instance's answer as text (empty if it has
         * none); the rest is not read, so an instance's endless or huge body is never held in memory.
         */
        private static Mono<String> head(ByteBufFlux content) {
            AtomicInteger seen = new AtomicInteger();
            return content.asByteArray()
                    .takeUntil(chunk -> seen.addAndGet(chunk.length) >= MAX_ANSWER_HEAD_BYTES)
                    .collect(ByteArrayOutputStream::new, (out, chunk) -> out.write(chunk, 0,
                            Math.min(chunk.length, MAX_ANSWER_HEAD_BYTES - out.size())))
                    .map(out -> out.toString(StandardCharsets.UTF_8));
        }

        /** The request's refusal; the first is logged as a warning, later ones at debug level. */
        private OverloadedException overloaded(Role role, Instance instance) {
            OverloadedException e = new OverloadedException(role, instance, maxConnections, maxPending);
            if (warnedOverloaded.compareAndSet(false, true)) {
                LOG.warn("{}. Requests are refused with 503 while this lasts; later refusals are logged at debug"
                        + " level", e.getMessage());
            } else {
                LOG.debug("{}", e.getMessage());
            }
            return e;
        }

        /**
         * POSTs {@code body} to the instance, signed for {@code transferId} when the proxy has a secret, with the
         * {@code traceparent} header unless it is null.
         */
        private HttpClient.ResponseReceiver<?> post(Instance instance, ObjectNode body, String transferId,
                String traceparent) {
            byte[] bytes = HttpJson.write(body).getBytes(StandardCharsets.UTF_8);
            return client.headers(h -> {
                        h.set(HttpHeaderNames.CONTENT_TYPE, "application/json");
                        if (traceparent != null) {
                            h.set(Spans.TRACEPARENT, traceparent);
                        }
                        if (requestAuth != null) {
                            requestAuth.sign(h, "POST", COMPLETIONS, transferId, bytes);
                        }
                    })
                    .post().uri(instance.baseUrl() + COMPLETIONS)
                    .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(bytes)));
        }

        Publisher<Void> register(HttpServerRequest request, HttpServerResponse response) {
            return HttpJson.withBody(request, response, MAX_REGISTRATION_BYTES, "a registration is {\"role\", \"http\","
                    + " \"notify\"}, with \"notify_ranks\" for an instance of several ranks, and nothing more", body -> {
                long signedAt = Long.MIN_VALUE;
                if (registrationAuth != null) {
                    try {
                        signedAt = registrationAuth.verify(request.requestHeaders(), body.getBytes(StandardCharsets.UTF_8));
                    } catch (RegistrationAuth.RefusedException e) {
                        return Mono.from(refuseRegistration(response, HttpResponseStatus.UNAUTHORIZED,
                                "unauthenticated_registration", e.getMessage(), request));
                    }
                }
                Instance instance;
                long incarnation;
                try {
                    ObjectNode json = HttpJson.object(body);
                    java.net.InetSocketAddress notify = Instance.address(text(json, "notify"));
                    instance = new Instance(Role.of(text(json, "role")), Instance.address(text(json, "http")), notify,
                            Instance.ranks(json, "notify_ranks", notify));
                    incarnation = incarnation(json);
                } catch (IllegalArgumentException e) {
                    return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST,
                            "invalid_request_error", "bad_registration", e.getMessage()));
                }
                return Mono.from(switch (registry.ping(instance, signedAt, incarnation)) {
                    case REGISTERED, REFRESHED -> HttpJson.reply(response, HttpResponseStatus.OK,
                            HttpJson.MAPPER.createObjectNode().put("status", "registered"));
                    case FULL -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                            "instance_cap", registry.maxPerRole() + " " + instance.role().wireName() + " instances are"
                                    + " registered, the most this proxy holds; a place frees when one stops pinging");
                    case REPLAYED -> refuseRegistration(response, HttpResponseStatus.UNAUTHORIZED,
                            "replayed_registration", "the registration is no newer than the last one accepted for this"
                                    + " instance: a replay", request);
                    case CLAIMED -> refuseRegistration(response, HttpResponseStatus.CONFLICT, "address_claimed",
                            "another live instance holds this registration's HTTP or notify address; an instance"
                                    + " registers the addresses it listens on, both of them", request);
                });
            });
        }

        /** Refuses a registration; the first refusal is logged as a warning, later ones at debug level. */
        private Publisher<Void> refuseRegistration(HttpServerResponse response, HttpResponseStatus status, String code,
                String message, HttpServerRequest request) {
            if (warnedRefusedRegistration.compareAndSet(false, true)) {
                LOG.warn("refused a registration from {}: {}. Later refusals are logged at debug level",
                        request.remoteAddress(), message);
            } else {
                LOG.debug("refused a registration from {}: {}", request.remoteAddress(), message);
            }
            return HttpJson.error(response, status, "authentication_error", code, message);
        }

        Publisher<Void> health(HttpServerRequest request, HttpServerResponse response) {
            ObjectNode body = HttpJson.MAPPER.createObjectNode().put("status", "ok");
            body.set("membership", members != null ? members.describe()
                    : HttpJson.MAPPER.createObjectNode().put("source", "registrations"));
            for (Role role : Role.values()) {
                ArrayNode list = body.putArray(role.wireName());
                for (Instance instance : registry.live(role)) {
                    list.addObject().put("http", Instance.hostPort(instance.httpAddress()))
                            .put("notify", Instance.hostPort(instance.notifyAddress()))
                            .put("ejected", !health.usable(instance));
                    instance.putRanks((ObjectNode) list.get(list.size() - 1));
                }
            }
            return HttpJson.reply(response, HttpResponseStatus.OK, body);
        }

        /** The registration's {@code incarnation}: a positive integer, or 0 when it names none. */
        private static long incarnation(JsonNode json) {
            JsonNode value = json.get("incarnation");
            if (value == null) {
                return 0;
            }
            if (!value.canConvertToLong() || !value.isIntegralNumber() || value.asLong() <= 0) {
                throw new IllegalArgumentException("registration's \"incarnation\" must be a positive integer");
            }
            return value.asLong();
        }

        private static String text(JsonNode json, String key) {
            JsonNode value = json.get(key);
            if (value == null || !value.isTextual()) {
                throw new IllegalArgumentException("registration needs \"" + key + "\" as a string, e.g. "
                        + "{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"127.0.0.1:8201\"}");
            }
            return value.asText();
        }
    }
}
