package dev.kvflux.serving.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The OpenAI chat completions request as kvflux serves it ({@code POST /v1/chat/completions}): the proxy checks
 * every request with {@link #check} before it reaches an instance, and kvflux's roles read its prompt's length
 * with {@link #promptTokens}, the simulated model counting whitespace-separated words as tokens, as for completions.
 *
 * <p>Checked fields: {@code messages} (required: a list of 1 to {@value #MAX_MESSAGES} objects, each with a string
 * {@code role} and a {@code content} that is a string, null, or a list of parts whose {@code text} parts are
 * counted), {@code max_completion_tokens} or {@code max_tokens} (integers from 1 to
 * {@value CompletionSchema#MAX_TOKENS}; the first wins, as in OpenAI's API), {@code stream} (a boolean),
 * {@code stream_options} (an object, with {@code stream} only), {@code model} (a string). Other fields pass unchecked
 * and unchanged: a chat request is sent on as the client wrote it.
 */
public final class ChatSchema {
    /** The most messages one request may hold. */
    public static final int MAX_MESSAGES = 4096;

    private ChatSchema() {
    }

    /**
     * {@code request} checked, within {@code maxModelLen} tokens, prompt and completion together.
     *
     * @throws CompletionSchema.ModelLengthException if it is longer
     * @throws IllegalArgumentException naming the first wrong field
     */
    public static ObjectNode check(ObjectNode request, int maxModelLen) {
        int prompt = promptTokens(request);
        int completion = maxTokens(request);
        CompletionSchema.stream(request);
        JsonNode options = request.get("stream_options");
        if (options != null && !options.isNull() && (!options.isObject() || !CompletionSchema.stream(request))) {
            throw new IllegalArgumentException("stream_options must be an object, and only with \"stream\": true");
        }
        JsonNode model = request.get("model");
        if (model != null && !model.isNull() && !model.isTextual()) {
            throw new IllegalArgumentException("model must be a string");
        }
        CompletionSchema.modelLength(prompt, completion, maxModelLen);
        return request;
    }

    /**
     * The words of every message's text, at least 1.
     *
     * @throws IllegalArgumentException if {@code messages} is missing or of another shape
     */
    public static int promptTokens(JsonNode request) {
        JsonNode messages = request.get("messages");
        if (messages == null || !messages.isArray() || messages.isEmpty() || messages.size() > MAX_MESSAGES) {
            throw new IllegalArgumentException("messages must be a list of 1 to " + MAX_MESSAGES + " messages, e.g."
                    + " [{\"role\": \"user\", \"content\": \"Hello\"}]");
        }
        long words = 0;
        for (int i = 0; i < messages.size(); i++) {
            JsonNode message = messages.get(i);
            if (!message.isObject() || !message.path("role").isTextual()) {
                throw new IllegalArgumentException("message " + i + " must be an object with a string \"role\"");
            }
            JsonNode content = message.get("content");
            if (content == null || content.isNull()) {
                continue;
            }
            if (content.isTextual()) {
                words += CompletionSchema.words(content.asText());
            } else if (content.isArray()) {
                for (JsonNode part : content) {
                    if (part.path("text").isTextual()) {
                        words += CompletionSchema.words(part.path("text").asText());
                    }
                }
            } else {
                throw new IllegalArgumentException("message " + i + "'s content must be a string or a list of parts");
            }
        }
        return (int) Math.max(1, Math.min(words, CompletionSchema.MAX_PROMPT_TOKENS + 1L));
    }

    /**
     * {@code max_completion_tokens}, else {@code max_tokens}, else {@value CompletionSchema#DEFAULT_MAX_TOKENS}.
     *
     * @throws IllegalArgumentException if the one given is not an integer from 1 to
     *     {@value CompletionSchema#MAX_TOKENS}
     */
    public static int maxTokens(JsonNode request) {
        JsonNode completion = request.get("max_completion_tokens");
        if (completion != null && !completion.isNull()) {
            if (!completion.isIntegralNumber() || !completion.canConvertToInt() || completion.asInt() < 1
                    || completion.asInt() > CompletionSchema.MAX_TOKENS) {
                throw new IllegalArgumentException("max_completion_tokens must be an integer from 1 to "
                        + CompletionSchema.MAX_TOKENS);
            }
            return completion.asInt();
        }
        return CompletionSchema.maxTokens(request);
    }
}
