package dev.kvflux.serving.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.nio.charset.StandardCharsets;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/** JSON bodies of the serving HTTP APIs: parsing requests and writing replies and OpenAI-style errors. */
public final class HttpJson {
    /** The shared mapper; thread-safe once configured. */
    public static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

    /** The largest request body the serving APIs read: ample for a prompt of a million token ids. */
    public static final int MAX_BODY_BYTES = 16 << 20;
    /** Bodies longer than this are checked and parsed off the event loop ({@link #withUtf8Buffer}). */
    public static final int OFF_LOOP_BYTES = 1 << 20;

    private HttpJson() {
    }

    /**
     * Reads the request's body as UTF-8 text (empty if there is none) and answers with what
     * {@code handler} makes of it. A body over {@link #MAX_BODY_BYTES}, declared or sent, is answered
     * {@code 413} with an OpenAI-style error and is not buffered past the limit; the handler never sees it.
     */
    public static Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response,
            Function<String, Publisher<Void>> handler) {
        return withBody(request, response, MAX_BODY_BYTES, "send a shorter prompt, or the prompt as a list of token ids",
                handler);
    }

    /**
     * As {@link #withBody(HttpServerRequest, HttpServerResponse, Function)} with a limit of {@code maxBytes};
     * the 413's message ends with {@code advice}. A body that is not well-formed UTF-8 is answered 400.
     */
    public static Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response, int maxBytes,
            String advice, Function<String, Publisher<Void>> handler) {
        return withBytes(request, response, maxBytes, advice, bytes -> withText(response, bytes, handler));
    }

    /**
     * Hands {@code bytes} as text to {@code handler}, or answers 400 ({@code invalid_utf8}) if they are not
     * well-formed UTF-8: nothing malformed is replaced and passed on.
     */
    public static Publisher<Void> withText(HttpServerResponse response, byte[] bytes,
            Function<String, Publisher<Void>> handler) {
        int bad = Utf8.firstMalformed(bytes);
        if (bad >= 0) {
            return error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error", "invalid_utf8",
                    "request body is not well-formed UTF-8 (at byte " + bad + "); send UTF-8 JSON");
        }
        // well-formed: decoded without a buffer of chars in between (ASCII straight to the string's bytes)
        return handler.apply(new String(bytes, StandardCharsets.UTF_8));
    }

    /**
     * Reads the request's body (up to {@code maxBytes}, else 413 ending with {@code advice}) and answers with what
     * {@code handler} makes of its bytes. A body that stops arriving before it ends (the server's read timeout, or
     * the client closing mid-body) is answered 408 when the connection is still open. The body is held within the
     * process's {@link BodyBudget}: when it is spent, 503 {@code body_budget_exhausted} with {@code Retry-After} at
     * once, the body unread.
     */
    public static Mono<Void> withBytes(HttpServerRequest request, HttpServerResponse response, int maxBytes,
            String advice, Function<byte[], Publisher<Void>> handler) {
        return withBytes(request, response, BodyBudget.process(), maxBytes, advice, null, handler);
    }

    /**
     * As {@link #withBytes(HttpServerRequest, HttpServerResponse, int, String, Function)} within {@code budget}, each
     * chunk passed through {@code digest} (when not null) as it arrives, so that the handler can check the body's
     * digest without hashing it again.
     */
    public static Mono<Void> withBytes(HttpServerRequest request, HttpServerResponse response, BodyBudget budget,
            int maxBytes, String advice, java.security.MessageDigest digest, Function<byte[], Publisher<Void>> handler) {
        return BodyReader.read(request, response, budget, maxBytes, advice, digest, handler);
    }

    /**
     * As {@link #withBody(HttpServerRequest, HttpServerResponse, Function)}, but the handler gets the well-formed UTF-8
     * body in the direct buffer it arrived into ({@link #object(io.netty.buffer.ByteBuf, ObjectMapper)} reads it),
     * valid until the handler's answer ends: no array or string of the body's size is made on the heap. A body of
     * more than {@value #OFF_LOOP_BYTES} bytes is checked and handed to the handler on
     * {@link Schedulers#boundedElastic()}: checking and parsing megabytes on the event loop would hold up every other
     * connection on it.
     */
    public static Mono<Void> withUtf8Buffer(HttpServerRequest request, HttpServerResponse response,
            Function<io.netty.buffer.ByteBuf, Publisher<Void>> handler) {
        return withUtf8Buffer(request, response, null, handler);
    }

    /**
     * As {@link #withUtf8Buffer(HttpServerRequest, HttpServerResponse, Function)}, each chunk of the body also passed
     * through {@code check} (when not null) as it arrives: a body it refuses is answered at once, before its end, and
     * the handler never sees it.
     */
    public static Mono<Void> withUtf8Buffer(HttpServerRequest request, HttpServerResponse response, BodyCheck check,
            Function<io.netty.buffer.ByteBuf, Publisher<Void>> handler) {
        return BodyReader.readBuffer(request, response, BodyBudget.process(), MAX_BODY_BYTES,
                "send a shorter prompt, or the prompt as a list of token ids", null, check, buffer -> {
                    Mono<Void> handled = Mono.defer(() -> {
                        int bad = Utf8.firstMalformed(buffer);
                        if (bad >= 0) {
                            return Mono.from(error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                                    "invalid_utf8", "request body is not well-formed UTF-8 (at byte " + bad
                                            + "); send UTF-8 JSON"));
                        }
                        return Mono.from(handler.apply(buffer));
                    });
                    return buffer.readableBytes() > OFF_LOOP_BYTES
                            ? handled.subscribeOn(Schedulers.boundedElastic()) : handled;
                });
    }

    /**
     * The body as a JSON object.
     *
     * @throws IllegalArgumentException saying what was wrong, if it is not one
     */
    public static ObjectNode object(String body) {
        return object(body, MAPPER);
    }

    /**
     * The body as a JSON object, read by {@code mapper} (whose stream constraints bound its strings and values).
     *
     * @throws BoundExceededException if the body goes past one of the mapper's constraints
     * @throws IllegalArgumentException saying what was wrong, if it is not a JSON object
     */
    public static ObjectNode object(String body, ObjectMapper mapper) {
        return object(mapper, () -> mapper.readTree(body));
    }

    /**
     * The readable bytes of {@code body}, UTF-8, as a JSON object read by {@code mapper}; the buffer's indexes are left
     * as they are. A string past the mapper's bounds stops the reading there, so a body far over them costs little.
     *
     * @throws BoundExceededException if the body goes past one of the mapper's constraints
     * @throws IllegalArgumentException saying what was wrong, if it is not a JSON object
     */
    public static ObjectNode object(io.netty.buffer.ByteBuf body, ObjectMapper mapper) {
        return object(mapper, () -> mapper.readTree((java.io.InputStream)
                new io.netty.buffer.ByteBufInputStream(body.duplicate())));
    }

    private interface TreeRead {
        JsonNode read() throws java.io.IOException;
    }

    private static ObjectNode object(ObjectMapper mapper, TreeRead read) {
        JsonNode node;
        try {
            node = read.read();
        } catch (com.fasterxml.jackson.core.exc.StreamConstraintsException e) {
            throw new BoundExceededException(e.getOriginalMessage());
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("request body is not JSON: " + e.getOriginalMessage());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        if (node == null || !node.isObject()) {
            throw new IllegalArgumentException("request body must be a JSON object, e.g. {\"prompt\": \"...\", \"max_tokens\": 16}");
        }
        requireWellFormedText(node);
        return (ObjectNode) node;
    }

    /**
     * Refuses a key or string value holding a lone UTF-16 surrogate (JSON can escape one, {@code "\\ud800"}, though
     * no Unicode text contains one): such text cannot be written back as UTF-8 and would reach instances and logs.
     */
    private static void requireWellFormedText(JsonNode node) {
        if (node.isTextual() && hasLoneSurrogate(node.textValue())) {
            throw new IllegalArgumentException("request body holds a lone UTF-16 surrogate in a string; send"
                    + " well-formed Unicode text");
        }
        for (var field : node.properties()) {
            if (hasLoneSurrogate(field.getKey())) {
                throw new IllegalArgumentException("request body holds a lone UTF-16 surrogate in a key; send"
                        + " well-formed Unicode text");
            }
        }
        for (JsonNode child : node) {
            requireWellFormedText(child);
        }
    }

    private static boolean hasLoneSurrogate(String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 == text.length() || !Character.isLowSurrogate(text.charAt(i + 1))) {
                    return true;
                }
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return true;
            }
        }
        return false;
    }

    /** A body that went past a bound of the mapper that read it (a string's length, the number of its values). */
    public static final class BoundExceededException extends IllegalArgumentException {
        BoundExceededException(String message) {
            super(message);
        }
    }

    public static String write(JsonNode node) {
        try {
            return MAPPER.writeValueAsString(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("JSON tree did not serialize", e);
        }
    }

    /** {@code node} as UTF-8 JSON bytes, written straight to bytes (no text copy in between). */
    public static byte[] bytes(JsonNode node) {
        try {
            return MAPPER.writeValueAsBytes(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("JSON tree did not serialize", e);
        }
    }

    /** Replies {@code status} with {@code body} as JSON. */
    public static Publisher<Void> reply(HttpServerResponse response, HttpResponseStatus status, JsonNode body) {
        return response.status(status)
                .header(HttpHeaderNames.CONTENT_TYPE, "application/json")
                .sendString(Mono.just(write(body)))
                .then();
    }

    /** Replies {@code status} with an OpenAI-style error: {@code {"error": {"message", "type", "code"}}}. */
    public static Publisher<Void> error(HttpServerResponse response, HttpResponseStatus status, String type,
            String code, String message) {
        return reply(response, status, errorBody(type, code, message));
    }

    public static ObjectNode errorBody(String type, String code, String message) {
        ObjectNode body = MAPPER.createObjectNode();
        ObjectNode error = body.putObject("error");
        error.put("message", message);
        error.put("type", type);
        error.put("code", code);
        return body;
    }
}
