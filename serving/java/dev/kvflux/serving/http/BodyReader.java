package dev.kvflux.serving.http;

import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * Reads one request's body into memory within its bounds: its length (413 past {@code maxBytes}, declared or sent),
 * the process's {@link BodyBudget} (503 with {@code Retry-After} when spent, before the bytes are read), and its
 * arrival (408 when it stops before its end). The bytes can be passed through a digest as they arrive. The handler
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
        Buffer body = new Buffer(length > 0 ? (int) length : 0);
        return request.receive().asByteArray()
                .doOnNext(chunk -> {
                    long after = (long) body.size + chunk.length;
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
                        digest.update(chunk);
                    }
                    body.append(chunk);
                })
                .onErrorMap(e -> !(e instanceof BodyTooLargeException || e instanceof BudgetSpentException),
                        BodyIncompleteException::new)
                .then(Mono.fromSupplier(body::bytes))
                .flatMap(bytes -> bytes.length <= ON_LOOP_BYTES ? Mono.from(handler.apply(bytes))
                        // decoding and parsing megabytes would hold up every other connection on this event
                        // loop, and a connection whose bytes wait behind it can be closed as idle
                        : Mono.defer(() -> Mono.from(handler.apply(bytes))).subscribeOn(Schedulers.parallel()))
                .onErrorResume(BodyTooLargeException.class, e -> Mono.from(tooLarge(response, maxBytes, "more was sent",
                        advice)))
                .onErrorResume(BudgetSpentException.class, e -> Mono.from(budgetSpent(response, budget)))
                .onErrorResume(BodyIncompleteException.class, e -> response.hasSentHeaders() ? Mono.empty()
                        : Mono.from(HttpJson.error(response, HttpResponseStatus.REQUEST_TIMEOUT, "invalid_request_error",
                                "body_incomplete", "the request body did not arrive whole in time ("
                                        + e.getCause().getClass().getSimpleName() + "); send the whole body at once")))
                .doFinally(signal -> budget.release(held.getAndSet(0)));
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

    /** A body's bytes as they arrive: one array of the declared length, or grown as needed when none was declared. */
    private static final class Buffer {
        private byte[] bytes;
        private int size;

        Buffer(int declared) {
            this.bytes = new byte[declared];
        }

        void append(byte[] chunk) {
            if (size + chunk.length > bytes.length) {
                bytes = Arrays.copyOf(bytes, Math.max(size + chunk.length, Math.min(bytes.length * 2,
                        HttpJson.MAX_BODY_BYTES)));
            }
            System.arraycopy(chunk, 0, bytes, size, chunk.length);
            size += chunk.length;
        }

        /** The body, handed over once: the buffer lets go of it, so that it is garbage once its handler is done. */
        byte[] bytes() {
            byte[] whole = size == bytes.length ? bytes : Arrays.copyOf(bytes, size);
            bytes = EMPTY;
            return whole;
        }

        private static final byte[] EMPTY = new byte[0];
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
