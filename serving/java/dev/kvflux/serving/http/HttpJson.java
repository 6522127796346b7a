package dev.kvflux.serving.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/** JSON bodies of the serving HTTP APIs: parsing requests and writing replies and OpenAI-style errors. */
public final class HttpJson {
    /** The shared mapper; thread-safe once configured. */
    public static final ObjectMapper MAPPER = new ObjectMapper();

    /** The largest request body the serving APIs read: ample for a prompt of a million token ids. */
    public static final int MAX_BODY_BYTES = 16 << 20;

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
     * the 413's message ends with {@code advice}.
     */
    public static Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response, int maxBytes,
            String advice, Function<String, Publisher<Void>> handler) {
        String declared = request.requestHeaders().get(HttpHeaderNames.CONTENT_LENGTH);
        if (declared != null && declaredLength(declared) > maxBytes) {
            return Mono.from(tooLarge(response, maxBytes, declared + " bytes declared", advice));
        }
        return request.receive().asByteArray()
                .collect(ByteArrayOutputStream::new, (body, chunk) -> {
                    if (body.size() + (long) chunk.length > maxBytes) {
                        throw new BodyTooLargeException();
                    }
                    body.writeBytes(chunk);
                })
                .map(body -> body.toString(StandardCharsets.UTF_8))
                .flatMap(body -> Mono.from(handler.apply(body)))
                .onErrorResume(BodyTooLargeException.class, e -> Mono.from(tooLarge(response, maxBytes, "more was sent",
                        advice)));
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
        return error(response, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "invalid_request_error", "body_too_large",
                "request body is over the " + limit + " limit (" + what + "); " + advice);
    }

    /** A body read past {@link #MAX_BODY_BYTES}; turned into a 413 answer. */
    private static final class BodyTooLargeException extends RuntimeException {
        BodyTooLargeException() {
            super(null, null, false, false);
        }
    }

    /**
     * The body as a JSON object.
     *
     * @throws IllegalArgumentException saying what was wrong, if it is not one
     */
    public static ObjectNode object(String body) {
        JsonNode node;
        try {
            node = MAPPER.readTree(body);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("request body is not JSON: " + e.getOriginalMessage());
        }
        if (node == null || !node.isObject()) {
            throw new IllegalArgumentException("request body must be a JSON object, e.g. {\"prompt\": \"...\", \"max_tokens\": 16}");
        }
        return (ObjectNode) node;
    }

    public static String write(JsonNode node) {
        try {
            return MAPPER.writeValueAsString(node);
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
