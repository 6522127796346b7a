package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.RequestGate;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.observe.HistoryLog;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.transfer.DecodeRanks;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.transfer.DecodeTransfer;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.ReceiveFailedException;
import dev.kvflux.transfer.TransferRefusedException;
import dev.kvflux.transfer.notify.NotifyMessage;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.nio.charset.StandardCharsets;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;
import java.time.Duration;

/**
 * Decode's {@code POST /v1/completions}: opens the request's transfer on each of decode's ranks
 * ({@link DecodeRanks}; refusals answered at once, a prefill of another TP size than {@code --peer-tp} with 400
 * {@code tp_mismatch}), waits for its KV, then decodes {@code max_tokens} tokens, one per decode step, streamed as server-sent
 * events when {@code stream} is true; the transfer is closed when the request ends, whatever way. A failed wait is
 * answered with the failure's kind: 503 {@code kv_transfer_failed} with prefill's code for {@code write_failed},
 * 504 {@code RECEIVE_DEADLINE}, 503 {@code REMOTE_BLOCKS_UNDELIVERABLE}, 503 {@code prefill_restarted}, 503
 * {@code decode_shutting_down}, 409 {@code duplicate_transfer_id}. Each request is span
 * {@code kvflux.decode.request} with children {@code kvflux.decode.receive} and {@code kvflux.decode.generate}; a
 * notice that carries a traceparent is span {@code kvflux.notify.receive}.
 */
final class DecodeCompletions {
    private final ServingModel model;
    private final DecodeRanks ranks;
    private final TpRanks pair;
    private final ObservationRegistry observations;
    private final RoleFront front;
    private final ClientShares shares;
    private final int maxModelLen;
    private final Handover handover;
    /** Where each request's use of its KV is recorded; null for nowhere. */
    private final HistoryLog history;

    DecodeCompletions(ServingModel model, DecodeRanks ranks, TpRanks pair, ObservationRegistry observations,
            RoleFront front, ClientShares shares, int maxModelLen, boolean readMode, Handover handover,
            HistoryLog history) {
        this.history = history;
        this.handover = handover;
        this.readMode = readMode;
        this.shares = shares;
        this.front = front;
        this.maxModelLen = maxModelLen;
        this.model = model;
        this.ranks = ranks;
        this.pair = pair;
        this.observations = observations;
    }

    /** READ mode: the first decode step runs layer by layer as the layers' reads pass their barriers. */
    private final boolean readMode;

    Publisher<Void> serve(HttpServerRequest request, HttpServerResponse response) {
        boolean chat = request.fullPath().endsWith("/chat/completions");
        return front.withBody(request, response, passed -> serve(passed, request.requestHeaders(), response, chat));
    }

    private Publisher<Void> serve(RequestGate.Passed passed, HttpHeaders headers, HttpServerResponse response,
            boolean chat) {
        String signedFor = passed.signedFor();
        CompletionRequest request;
        try {
            request = CompletionRequest.parse(CompletionSchema.parse(passed.body(), maxModelLen), Role.DECODE, maxModelLen,
                    chat, headers.get("X-Request-Id"));
        } catch (CompletionSchema.ModelLengthException e) {
            return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                    "context_length_exceeded", e.getMessage());
        } catch (IllegalArgumentException e) {
            return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error", "bad_request",
                    e.getMessage());
        }
        String id = request.params().transferId();
        if (signedFor != null && !signedFor.equals(id)) {
            return front.gate().mismatched(response, signedFor, id);
        }
        Observation span = Spans.server(observations, "kvflux.decode.request", id, headers);
        String traceId = Spans.traceId(span);
        try (LogContext.Scope _ = LogContext.open(id, traceId)) {
            return Mono.from(serve(request, passed.client(), span, traceId, response))
                    .doOnError(span::error)
                    .doFinally(signal -> span.stop())
                    .contextWrite(LogContext.context(id, traceId));
        }
    }

    /** Takes the request in, or refuses it at once; the request's answer. */
    private Publisher<Void> serve(CompletionRequest request, String client, Observation span, String traceId,
            HttpServerResponse response) {
        String id = request.params().transferId();
        int prefillTp = request.params().remoteNotifyRanks().size();
        if (prefillTp != pair.prefillTp()) {
            return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error", "tp_mismatch",
                    "this request's prefill runs " + prefillTp + " rank(s); this decode's KV is cut for prefills of "
                            + pair.prefillTp() + " (--peer-tp); route it to a decode started for that TP size");
        }
        int blocks = model.blocksFor(request.promptTokens());
        if (!shares.tryTake(client, blocks)) {
            return HttpJson.error(response, HttpResponseStatus.TOO_MANY_REQUESTS, "rate_limit_error",
                    "client_over_share", shares.refusal(blocks));
        }
        DecodeRanks.Transfer t;
        Handover.Marks marks = handover.begin(id);
        try {
            t = ranks.open(id, request.params().remoteNotifyRanks(), blocks, new Traced(id, traceId, marks));
        } catch (TransferRefusedException e) {
            shares.give(client, blocks);
            return refused(response, e);
        } catch (IllegalArgumentException e) {
            shares.give(client, blocks);
            return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error", "bad_request",
                    e.getMessage());
        } catch (RuntimeException e) {
            shares.give(client, blocks);
            throw e;
        }
        // READ mode: the first step runs layer by layer, each layer once its reads are through, beside the reads of
        // the layers after it; WRITE mode: the KV is whole when it arrives
        Mono<Void> kv = readMode ? Mono.when(t.kv(), t.layers().concatMap(l -> Mono.delay(layerStep(),
                Schedulers.parallel())).then()) : t.kv();
        return Spans.during(observations, "kvflux.decode.receive", id, span, kv)
                .then(Spans.during(observations, "kvflux.decode.generate", id, span,
                        Mono.defer(() -> {
                            marks.reached(Handover.Stage.DECODE_ADMITTED);
                            usesKv(id);
                            return Mono.from(decode(request, response, readMode ? 1 : 0, marks));
                        })))
                .onErrorResume(ReceiveFailedException.class, e -> Mono.from(failed(response, e)))
                // the side refuses a transfer id that is already waiting or finished
                .onErrorResume(e -> e instanceof TransferRefusedException && !response.hasSentHeaders(),
                        e -> Mono.from(refused(response, (TransferRefusedException) e)))
                .doFinally(signal -> {
                    t.close();
                    shares.give(client, blocks);
                });
    }

    /** Records that each rank's transfer {@code id} is decoded from. */
    private void usesKv(String id) {
        if (history != null) {
            ranks.ranks().forEach(rank -> history.usesKv(id, rank.incarnation()));
        }
    }

    private static Publisher<Void> refused(HttpServerResponse response, TransferRefusedException e) {
        return switch (e.reason()) {
            case OUT_OF_BLOCKS -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                    "kv_blocks_exhausted", e.getMessage() + " (--kv-blocks)");
            case TOO_LARGE -> HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                    "request_too_large", e.getMessage());
            case SHUTTING_DOWN -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                    "decode_shutting_down", e.getMessage());
            case DUPLICATE, STALE_PEER -> HttpJson.error(response, HttpResponseStatus.CONFLICT, "invalid_request_error",
                    "duplicate_transfer_id", e.getMessage());
        };
    }

    private static Publisher<Void> failed(HttpServerResponse response, ReceiveFailedException e) {
        return switch (e.kind()) {
            case WRITE_FAILED, CORRUPT, READ_FAILED -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE,
                    "kv_transfer_failed", e.code().name(), e.getMessage());
            case UNDELIVERABLE -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE,
                    "kv_transfer_failed", "REMOTE_BLOCKS_UNDELIVERABLE", e.getMessage());
            case DEADLINE -> HttpJson.error(response, HttpResponseStatus.GATEWAY_TIMEOUT, "kv_transfer_timeout",
                    "RECEIVE_DEADLINE", e.getMessage());
            case PREFILL_RESTARTED -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE,
                    "kv_transfer_failed", "prefill_restarted", e.getMessage());
            case SHUTTING_DOWN -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                    "decode_shutting_down", e.getMessage());
        };
    }

    /** One layer's share of a decode step. */
    private Duration layerStep() {
        return model.decodeStep().dividedBy(Math.max(1, model.layers()));
    }

    /** The answer, after the decode steps still to run ({@code stepsDone} ran layer by layer already). */
    private Publisher<Void> decode(CompletionRequest request, HttpServerResponse response, int stepsDone,
            Handover.Marks marks) {
        if (!request.stream()) {
            return Mono.delay(model.decodeStep().multipliedBy(Math.max(0, request.maxTokens() - stepsDone)),
                    Schedulers.parallel())
                    .flatMap(tick -> {
                        marks.reached(Handover.Stage.FIRST_TOKEN_OUT);
                        return Mono.from(HttpJson.reply(response, HttpResponseStatus.OK,
                                Answers.completion(request, model.name(), request.maxTokens())));
                    });
        }
        Flux<String> events = Flux.interval(model.decodeStep(), Schedulers.parallel())
                .take(request.maxTokens())
                .doOnNext(i -> {
                    if (i == 0) {
                        marks.reached(Handover.Stage.FIRST_TOKEN_OUT);
                    }
                })
                .map(i -> "data: " + HttpJson.write(Answers.chunk(request, model.name(), i,
                        i == request.maxTokens() - 1)) + "\n\n")
                .concatWith(Mono.just("data: [DONE]\n\n"));
        return response.header(HttpHeaderNames.CONTENT_TYPE, "text/event-stream")
                .sendString(events, StandardCharsets.UTF_8)
                .then();
    }

    /** One request as the transfer's observer: its trace id for log lines, and a span for each traced notice. */
    private final class Traced implements DecodeTransfer.Observer {
        private final String id;
        private final String traceId;
        private final Handover.Marks marks;

        Traced(String id, String traceId, Handover.Marks marks) {
            this.marks = marks;
            this.id = id;
            this.traceId = traceId;
        }

        @Override
        public String traceId() {
            return traceId;
        }

        @Override
        public void notice(NotifyMessage message) {
            if (message instanceof NotifyMessage.WriteDone) {
                marks.reached(Handover.Stage.WRITE_DONE_RECEIVED);
            }
            if (message.traceparent() != null) {
                Spans.received(observations, "kvflux.notify.receive", id, message.traceparent()).stop();
            }
        }
    }
}
