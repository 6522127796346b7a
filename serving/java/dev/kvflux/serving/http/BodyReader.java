package dev.kvflux.serving.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.security.MessageDigest;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * Reads one request's body into a direct buffer within its bounds: its length (413 past {@code maxBytes}, declared or sent),
 * the process's {@link BodyBudget} (503 with {@code Retry-After} when spent, before the bytes are read), and its
 * arrival (408 when it stops before its end). The bytes can be passed through a digest as they arrive, and through a
 * {@link BodyCheck} that refuses the body before its end. The handler
 * sees the whole body, on the event loop for a small one and on {@link Schedulers#parallel()} for a large one; the
 * body's share of the budget is given back when the handler's answer ends, however it ends.
 */
public final class BodyReader {
    /** The largest body handled on the event loop that received it; a larger one is handled off it. */
    static final int ON_LOOP_BYTES = 64 << 10;
    /** How long a client refused for the budget is asked to wait before it retries, in seconds. */
    static final int RETRY_AFTER_SECONDS = 1;

    private BodyReader() {
    }

    static Mono<Void> read(HttpServerRequest request, HttpServerResponse response, BodyBudget budget, int maxBytes,
            String advice, MessageDigest digest, Function<byte[], Publisher<Void>> handler) {
        return readBuffer(request, response, budget, maxBytes, advice, digest, null,
                buffer -> handler.apply(ByteBufUtil.getBytes(buffer)));
    }

    /**
     * As {@link #read} but the handler gets the body in the direct buffer it arrived into, off the heap, and the
     * buffer is released once the handler's answer ends: a body refused after a look at part of it (a prompt far
     * over the model length) leaves no array of its size behind for the collector. Each chunk also goes through
     * {@code check} (when not null) as it arrives: when the check refuses the body, its answer goes out at once, the
     * connection is closed soon after ({@link #lingerThenClose}), and the rest of the body is dropped unread.
     */
    static Mono<Void> readBuffer(HttpServerRequest request, HttpServerResponse response, BodyBudget budget,
            int maxBytes, String advice, MessageDigest digest, BodyCheck check,
            Function<ByteBuf, Publisher<Void>> handler) {
        String declared = request.requestHeaders().get(HttpHeaderNames.CONTENT_LENGTH);
        long length = declared == null ? -1 : declaredLength(declared);
        if (length > maxBytes) {
            return Mono.from(tooLarge(response, maxBytes, declared + " bytes declared", advice));
        }
        AtomicLong held = new AtomicLong();
        if (length > 0) {
            if (!budget.tryReserve(length)) {
                return Mono.from(budgetSpent(response, budget));
            }
            held.set(length);
        }
        AtomicReference<ByteBuf> body = new AtomicReference<>();
        return request.receive()
                .doOnNext(chunk -> {
                    ByteBuf into = body.get();
                    int size = into == null ? 0 : into.readableBytes();
                    long after = (long) size + chunk.readableBytes();
                    if (after > maxBytes) {
                        throw new BodyTooLargeException();
                    }
                    if (after > held.get()) {
                        // a body that declared no length (or sent more than it declared) takes its budget as it comes
                        if (!budget.tryReserve(after - held.get())) {
                            throw new BudgetSpentException();
                        }
                        held.set(after);
                    }
                    if (digest != null) {
                        digest.update(chunk.nioBuffer());
                    }
                    if (check != null) {
                        check.next(chunk.nioBuffer());
                    }
                    if (into == null) {
                        into = ByteBufAllocator.DEFAULT.directBuffer(
                                (int) Math.max(chunk.readableBytes(), Math.max(length, 0)), maxBytes);
                        body.set(into);
                    }
                    into.writeBytes(chunk);
                })
                .onErrorMap(e -> !(e instanceof BodyTooLargeException || e instanceof BudgetSpentException
                                || e instanceof BodyCheck.Refused), BodyIncompleteException::new)
                .then(Mono.defer(() -> {
                    ByteBuf whole = body.get() != null ? body.get() : Unpooled.EMPTY_BUFFER;
                    return whole.readableBytes() <= ON_LOOP_BYTES ? Mono.from(handler.apply(whole))
                            // decoding and parsing megabytes would hold up every other connection on this event
                            // loop, and a connection whose bytes wait behind it can be closed as idle
                            : Mono.defer(() -> Mono.from(handler.apply(whole))).subscribeOn(Schedulers.parallel());
                }))
                .onErrorResume(BodyTooLargeException.class, e -> Mono.from(tooLarge(response, maxBytes, "more was sent",
                        advice)))
                .onErrorResume(BudgetSpentException.class, e -> Mono.from(budgetSpent(response, budget)))
                .onErrorResume(BodyCheck.Refused.class, e -> {
                    lingerThenClose(response);
                    return Mono.from(HttpJson.error(response, e.status(), e.type(), e.code(), e.getMessage()));
                })
                .onErrorResume(BodyIncompleteException.class, e -> response.hasSentHeaders() ? Mono.empty()
                        : Mono.from(HttpJson.error(response, HttpResponseStatus.REQUEST_TIMEOUT, "invalid_request_error",
                                "body_incomplete", "the request body did not arrive whole in time ("
                                        + e.getCause().getClass().getSimpleName() + "); send the whole body at once")))
                .doFinally(signal -> {
                    // once the answer has ended, however it ended: the body handled, cut short, refused or cancelled
                    ByteBuf whole = body.getAndSet(null);
                    if (whole != null) {
                        whole.release();
                    }
                    budget.release(held.getAndSet(0));
                    if (check != null) {
                        check.close();
                    }
                });
    }

    /**
     * 503 {@code body_budget_exhausted} with {@code Retry-After}; the body is not kept, and the connection is closed
     * soon after ({@link #lingerThenClose}).
     */
    static Publisher<Void> budgetSpent(HttpServerResponse response, BodyBudget budget) {
        lingerThenClose(response);
        return HttpJson.error(response.header(HttpHeaderNames.RETRY_AFTER, Integer.toString(RETRY_AFTER_SECONDS)),
                HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded", "body_budget_exhausted", "this server already"
                        + " holds " + (budget.reserved() >> 20) + " MiB of request bodies, its budget of "
                        + (budget.capacity() >> 20) + " MiB; retry in " + RETRY_AFTER_SECONDS + " s, or send a smaller"
                        + " body");
    }

    /**
     * Closes the connection of an answer given without its request's body once the answer is sent, gently
     * ({@link ConnectionGuard#lingerOnClose}): the body still arriving is read for a moment and dropped, not kept, so
     * that a client still sending it reads the answer instead of a reset.
     */
    public static void lingerThenClose(HttpServerResponse response) {
        if (!response.hasSentHeaders()) {
            response.keepAlive(false);
        }
        response.withConnection(ConnectionGuard::lingerOnClose);
    }



    private static long declaredLength(String header) {
        try {
            return Long.parseLong(header.trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private static Publisher<Void> tooLarge(HttpServerResponse response, int maxBytes, String what, String advice) {
        String limit = maxBytes >= 1 << 20 ? (maxBytes >> 20) + " MiB" : maxBytes >= 1 << 10 ? (maxBytes >> 10) + " KiB"
                : maxBytes + " bytes";
        lingerThenClose(response);
        return HttpJson.error(response, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "invalid_request_error",
                "body_too_large", "request body is over the " + limit + " limit (" + what + "); " + advice);
    }

    /** The body stopped arriving before it ended; its cause says how. */
    private static final class BodyIncompleteException extends RuntimeException {
        BodyIncompleteException(Throwable cause) {
            super(cause.toString(), cause, false, false);
        }
    }

    /** A body read past its limit; turned into a 413 answer. */
    private static final class BodyTooLargeException extends RuntimeException {
        BodyTooLargeException() {
            super(null, null, false, false);
        }
    }

    /** A body that declared no length outgrew what the budget had left; turned into a 503 answer. */
    private static final class BudgetSpentException extends RuntimeException {
        BudgetSpentException() {
            super(null, null, false, false);
        }
    }
}
