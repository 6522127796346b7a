package dev.kvflux.pipeline.proxy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerResponse;

/** JSON bodies of the serving HTTP APIs: parsing requests and writing replies and OpenAI-style errors. */
public final class HttpJson {
    /** The shared mapper; thread-safe once configured. */
    public static final ObjectMapper MAPPER = new ObjectMapper();

    private HttpJson() {
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
