package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.CompletionApi;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.observe.Handover;
import io.micrometer.observation.Observation;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.timeout.ReadTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerResponse;
import reactor.util.concurrent.Queues;

/**
 * {@link FirstToken#PREFILL}: a streamed completion's first token is prefill's. As soon as prefill answers, its one
 * token goes to the client as the stream's first event, in the shape decode's events have; decode's stream follows
 * without its own first event (the same token, produced again). The client's time to first token becomes prefill's;
 * what it receives is the stream it would have had. Only for streamed requests of at least 2 tokens.
 *
 * <p>Exactly one answer reaches the client:
 * <ul>
 *   <li>prefill answers 200 first: the stream starts with its token; decode's events follow, and a decode that fails
 *       or stalls from then on ends the stream with an error event and {@code [DONE]};</li>
 *   <li>decode answers anything but a stream first (a refusal, a failed transfer): decode's answer, as without this
 *       mode;</li>
 *   <li>prefill fails before decode's stream began: prefill's error, and decode's request is cancelled; after decode's
 *       stream began: decode's whole stream, its first event included (decode has the KV).</li>
 * </ul>
 * Decode's events wait for prefill's token in a buffer of at most {@value #BUFFERED_EVENTS} reads; a decode that sends
 * more before prefill answers ends the request with an error.
 */
final class PrefillFirstToken {
    /** Reads of decode's stream held while prefill's token has not come. */
    static final int BUFFERED_EVENTS = 256;
    /** The longest first event of decode's that is looked through for its end. */
    static final int MAX_FIRST_EVENT_BYTES = 64 * 1024;

    /** Stands for "prefill failed after decode's stream began: pass decode's stream on whole" (compared by identity). */
    @SuppressWarnings("StringOperationCanBeSimplified")
    private static final String DECODE_WHOLE = new String("decode's stream, whole");

    private static final int NOBODY = 0;
    private static final int STREAMING = 1;
    private static final int DECODE_OWNS = 2;
    private static final int PREFILL_FAILED = 3;

    private PrefillFirstToken() {
    }

    /** Whether the mode applies to a request: streamed, of at least 2 tokens. */
    static boolean applies(FirstToken mode, boolean streamed, int maxTokens) {
        return mode == FirstToken.PREFILL && streamed && maxTokens >= 2;
    }

    /** The answer to one request, and the exchanges it started (disposed by the caller when the request ends). */
    record Answer(Mono<Void> answered, Disposable exchanges) {
    }

    static Answer answer(ProxyRoutes.Handlers h, ObjectNode json, CompletionApi api, String transferId, String client,
            Instance prefill, Instance decode, HttpServerResponse response, Observation prefillCall,
            Observation decodeCall, Handover.Marks marks, Duration firstByteWithin) {
        AtomicInteger owner = new AtomicInteger(NOBODY);
        Sinks.Many<ByteBuf> events = Sinks.many().unicast().onBackpressureBuffer(
                Queues.<ByteBuf>get(BUFFERED_EVENTS).get());
        AtomicBoolean decodeStreaming = new AtomicBoolean();
        Sinks.Empty<Void> decodeAnswered = Sinks.empty();
        Disposable.Composite exchanges = reactor.core.Disposables.composite();

        // decode's exchange runs on its own: it feeds its stream into the buffer, or answers the client itself
        exchanges.add(h.post(decode, ProxyRoutes.Handlers.toDecode(json, transferId, prefill), transferId,
                        dev.kvflux.serving.observe.Spans.traceparent(decodeCall), client, api)
                .response((status, content) -> {
                    h.health().requested(decode, true);
                    String type = status.responseHeaders().get(HttpHeaderNames.CONTENT_TYPE);
                    if (status.status().code() == 200 && type != null && type.startsWith("text/event-stream")) {
                        decodeStreaming.set(true);
                        return content.retain()
                                .doOnNext(buf -> {
                                    if (events.tryEmitNext(buf).isFailure()) {
                                        buf.release();
                                        events.tryEmitError(new IllegalStateException("decode sent more than "
                                                + BUFFERED_EVENTS + " reads before prefill's first token could be"
                                                + " passed on"));
                                    }
                                })
                                .doOnComplete(events::tryEmitComplete)
                                .then();
                    }
                    if (owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                        return h.relay(status, content, decode, response,
                                () -> marks.reached(Handover.Stage.CLIENT_FIRST_BYTE))
                                .doOnSuccess(v -> decodeAnswered.tryEmitEmpty())
                                .doOnError(decodeAnswered::tryEmitError);
                    }
                    return ProxyRoutes.Handlers.head(content).doOnNext(text -> events.tryEmitError(
                            new IllegalStateException("decode answered " + status.status().code()
                                    + " after prefill's first token was sent: " + text))).then();
                })
                .then()
                .doOnError(e -> {
                    if (e instanceof ReadTimeoutException) {
                        h.canaries().suspect(decode);
                    } else {
                        h.health().requested(decode, false);
                    }
                    decodeCall.error(e);
                    events.tryEmitError(e);
                    if (!decodeStreaming.get() && owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                        decodeAnswered.tryEmitError(e);
                    }
                })
                .doFinally(signal -> decodeCall.stop())
                .subscribe(null, e -> { }));

        // prefill's answer: its token opens the stream, or its failure answers the client
        dev.kvflux.serving.observe.Step prefillStep = dev.kvflux.serving.observe.Step.of(prefillCall);
        Mono<Void> viaPrefill = h.prefillAnswer(prefill, ProxyRoutes.Handlers.toPrefill(json, transferId, decode),
                        transferId, dev.kvflux.serving.observe.Spans.traceparent(prefillCall), client, prefillStep, api)
                .doOnNext(text -> marks.reached(Handover.Stage.PREFILL_ANSWERED))
                .doOnError(prefillStep::fail)
                .doFinally(signal -> prefillStep.stop())
                // prefill's failure alone is caught here; a failure of the stream once sent goes on to the caller
                .onErrorResume(e -> {
                    if (decodeStreaming.get() && owner.compareAndSet(NOBODY, DECODE_OWNS)) {
                        return Mono.just(DECODE_WHOLE);
                    }
                    if (owner.compareAndSet(NOBODY, PREFILL_FAILED)) {
                        return Mono.error(e);
                    }
                    return Mono.never();
                })
                .flatMap(text -> {
                    if (text == DECODE_WHOLE) {
                        return stream(h, decode, response, null, events.asFlux(), marks, firstByteWithin);
                    }
                    ByteBuf first = firstEvent(text, api);
                    if (first == null || !owner.compareAndSet(NOBODY, STREAMING)) {
                        if (first != null) {
                            first.release();
                        }
                        // no token in prefill's answer: decode's stream, whole
                        return owner.compareAndSet(NOBODY, DECODE_OWNS) ? stream(h, decode, response, null,
                                events.asFlux(), marks, firstByteWithin) : Mono.never();
                    }
                    return stream(h, decode, response, first, afterFirstEvent(events.asFlux()), marks, firstByteWithin);
                });
        Mono<Void> firstByte = Mono.delay(firstByteWithin, Schedulers.parallel())
                .then(Mono.defer(() -> owner.compareAndSet(NOBODY, DECODE_OWNS)
                        ? Mono.<Void>error(new UpstreamErrors.FirstByteTimeoutException(decode, firstByteWithin, true))
                        : Mono.<Void>never()))
                .doOnError(e -> h.canaries().suspect(decode));
        Mono<Void> ejected = UpstreamErrors.onEjection(h.health(), decode,
                () -> owner.compareAndSet(NOBODY, DECODE_OWNS));
        Mono<Void> answered = Mono.firstWithSignal(viaPrefill, decodeAnswered.asMono(), firstByte, ejected)
                .doFinally(signal -> {
                    exchanges.dispose();
                    // whatever decode sent that the client did not take is released
                    events.asFlux().subscribe(ByteBuf::release, e -> { }).dispose();
                });
        return new Answer(answered, exchanges);
    }

    /**
     * Sends the stream: {@code first} (null for none), then {@code rest}, decode's. Decode's part is watched for stalls
     * from its first read on, as a stream without the mode is from decode's first byte, and that first read is bounded
     * by {@code firstByteWithin}; a failure or a stall ends the stream with an error event.
     */
    private static Mono<Void> stream(ProxyRoutes.Handlers h, Instance decode, HttpServerResponse response, ByteBuf first,
            Flux<ByteBuf> rest, Handover.Marks marks, Duration firstByteWithin) {
        response.status(HttpResponseStatus.OK).header(HttpHeaderNames.CONTENT_TYPE, "text/event-stream");
        java.util.concurrent.atomic.AtomicReference<StreamWatch.Stream> watch = new java.util.concurrent.atomic.AtomicReference<>();
        Sinks.One<String> stalled = Sinks.one();
        Flux<ByteBuf> decodes = rest
                .timeout(Mono.delay(firstByteWithin, Schedulers.parallel()), read -> Mono.never())
                .onErrorMap(java.util.concurrent.TimeoutException.class, e -> {
                    h.canaries().suspect(decode);
                    return new UpstreamErrors.FirstByteTimeoutException(decode, firstByteWithin, true);
                })
                .doOnNext(buf -> {
                    StreamWatch.Stream watched = watch.get();
                    if (watched == null) {
                        watched = h.streams().start(decode);
                        watch.set(watched);
                        watched.aborted().subscribe(stalled::tryEmitValue);
                    }
                    watched.progressed();
                });
        AtomicBoolean started = new AtomicBoolean();
        Flux<ByteBuf> body = (first == null ? decodes : Flux.concat(Mono.just(first), decodes))
                .doOnNext(buf -> {
                    if (!started.getAndSet(true)) {
                        marks.reached(Handover.Stage.CLIENT_FIRST_BYTE);
                    }
                })
                .takeUntilOther(stalled.asMono())
                // reads of decode's still buffered when the client goes are released, not dropped
                .doOnDiscard(ByteBuf.class, io.netty.util.ReferenceCountUtil::safeRelease)
                .onErrorResume(e -> {
                    h.upstreamError(dev.kvflux.serving.api.Role.DECODE,
                            e instanceof UpstreamErrors.FirstByteTimeoutException ? "timeout" : "failed", 1);
                    return Mono.just(Unpooled.wrappedBuffer(ProxyRoutes.Handlers.errorEvent(
                            "decode's stream failed after prefill's first token: " + e.getMessage())));
                });
        Mono<ByteBuf> tail = Mono.fromSupplier(() -> {
            StreamWatch.Stream watched = watch.get();
            return watched == null ? null : watched.abortReason();
        }).map(why -> {
            h.upstreamError(dev.kvflux.serving.api.Role.DECODE, "stalled", 1);
            return Unpooled.wrappedBuffer(ProxyRoutes.Handlers.errorEvent(why));
        });
        return response.send(body.concatWith(tail), buf -> true).then().doFinally(signal -> {
            StreamWatch.Stream watched = watch.get();
            if (watched != null) {
                watched.ended();
            }
        });
    }

    /**
     * Prefill's answer as the stream's first event, in the shape decode streams ({@code text_completion} with
     * {@code text}, or {@code chat.completion.chunk} with {@code delta}); null when the answer holds no token.
     */
    static ByteBuf firstEvent(String answer, CompletionApi api) {
        JsonNode body;
        try {
            body = HttpJson.MAPPER.readTree(answer);
        } catch (java.io.IOException | RuntimeException e) {
            return null;
        }
        JsonNode choice = body.path("choices").path(0);
        boolean chat = api == CompletionApi.CHAT;
        JsonNode token = chat ? choice.path("message").path("content") : choice.path("text");
        if (!token.isTextual() || !body.path("id").isTextual()) {
            return null;
        }
        ObjectNode event = HttpJson.MAPPER.createObjectNode().put("id", body.path("id").asText())
                .put("object", chat ? "chat.completion.chunk" : "text_completion");
        event.set("created", body.path("created"));
        event.set("model", body.path("model"));
        ObjectNode out = event.putArray("choices").addObject().put("index", 0);
        if (chat) {
            out.putObject("delta").put("role", "assistant").put("content", token.asText());
        } else {
            out.put("text", token.asText());
        }
        out.putNull("finish_reason");
        return Unpooled.wrappedBuffer(("data: " + HttpJson.write(event) + "\n\n").getBytes(StandardCharsets.UTF_8));
    }

    /**
     * A stream of server-sent events without its first event: the bytes up to the first blank line ({@code \n\n} or
     * {@code \r\n\r\n}) are dropped, whatever reads they span; a first event longer than
     * {@value #MAX_FIRST_EVENT_BYTES} bytes fails the stream.
     */
    static Flux<ByteBuf> afterFirstEvent(Flux<ByteBuf> events) {
        return Flux.defer(() -> {
            int[] state = {0, 0}; // [0]: bytes looked through; [1]: 1 once the first event has ended
            byte[] last = new byte[3];
            return events.handle((buf, sink) -> {
                if (state[1] == 1) {
                    sink.next(buf);
                    return;
                }
                int from = buf.readerIndex();
                int to = buf.writerIndex();
                for (int i = from; i < to; i++) {
                    byte b = buf.getByte(i);
                    boolean ends = b == '\n' && (last[2] == '\n' || last[2] == '\r' && last[1] == '\n'
                            && last[0] == '\r');
                    last[0] = last[1];
                    last[1] = last[2];
                    last[2] = b;
                    if (ends) {
                        state[1] = 1;
                        if (i + 1 < to) {
                            sink.next(buf.retainedSlice(i + 1, to - i - 1));
                        }
                        buf.release();
                        return;
                    }
                }
                state[0] += to - from;
                buf.release();
                if (state[0] > MAX_FIRST_EVENT_BYTES) {
                    sink.error(new IllegalStateException("decode's first event is longer than "
                            + MAX_FIRST_EVENT_BYTES + " bytes"));
                }
            });
        });
    }
}
