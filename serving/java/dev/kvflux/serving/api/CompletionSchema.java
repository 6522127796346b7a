package dev.kvflux.serving.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.http.HttpJson;
import java.util.Locale;
import java.util.Map;

/**
 * The OpenAI completions request as kvflux serves it: the proxy checks every request with {@link #check}
 * before it reaches an instance, and the roles read the fields they use with the same methods, so that a
 * request the proxy lets through is one both roles accept.
 *
 * <p>Checked fields, each optional unless said: {@code prompt} (required: a string with at least one word,
 * a list of token ids, or a list holding one string or one list of token ids; at most
 * {@value #MAX_PROMPT_TOKENS} tokens, counting a string's whitespace-separated words), {@code model} (a
 * string), {@code max_tokens} (an integer from 1 to {@value #MAX_TOKENS}), {@code stream}, {@code echo}
 * (booleans), {@code stream_options} (an object, with {@code stream} only), {@code temperature} (0 to 2),
 * {@code top_p} (0 to 1), {@code presence_penalty}, {@code frequency_penalty} (-2 to 2), {@code n} and
 * {@code best_of} (1: one choice per request), {@code logprobs} (0 to 5), {@code seed} (an integer),
 * {@code stop} (a string or a list of up to 4), {@code user}, {@code suffix} (strings), {@code logit_bias}
 * (an object of numbers from -100 to 100). {@code null} stands for absent. Other fields pass unchecked.
 */
public final class CompletionSchema {
    /** The default {@code max_tokens}, as OpenAI's API. */
    public static final int DEFAULT_MAX_TOKENS = 16;
    /** The largest {@code max_tokens} accepted. */
    public static final int MAX_TOKENS = 65_536;
    /** The longest prompt accepted, in tokens. */
    public static final int MAX_PROMPT_TOKENS = 1 << 20;
    /**
     * The longest request by default, prompt and {@code max_tokens} together, in tokens: the context length of the
     * simulated model (DeepSeek-V2-Lite's 32K), as vLLM's {@code --max-model-len} defaults to the model's.
     */
    public static final int DEFAULT_MAX_MODEL_LEN = 32_768;

    /** A request longer than the model length: answered 400 {@code context_length_exceeded}, as OpenAI does. */
    public static final class ModelLengthException extends IllegalArgumentException {
        public ModelLengthException(String message) {
            super(message);
        }
    }

    private static final Map<String, double[]> NUMBER_RANGES = Map.of(
            "temperature", new double[] {0, 2},
            "top_p", new double[] {0, 1},
            "presence_penalty", new double[] {-2, 2},
            "frequency_penalty", new double[] {-2, 2});

    private CompletionSchema() {
    }

    /** Readers of request bodies bounded by a model length, one per model length in use. */
    private static final java.util.Map<Integer, com.fasterxml.jackson.databind.ObjectMapper> BOUNDED =
            new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * A completion request's body as a JSON object, read within bounds of {@code maxModelLen}: no string of more than
     * 64 characters per token of it (at least 64 Ki), and no more than 4 JSON values per token of it (and 4,096 more),
     * so a body far over the model length is refused while it is read, before its text or values fill the heap. Any
     * request within the model length fits these bounds many times over.
     *
     * @throws ModelLengthException if the body goes past them
     * @throws IllegalArgumentException if the body is not a JSON object
     */
    public static ObjectNode parse(String body, int maxModelLen) {
        try {
            return HttpJson.object(body, BOUNDED.computeIfAbsent(maxModelLen, CompletionSchema::boundedMapper));
        } catch (HttpJson.BoundExceededException e) {
            throw new ModelLengthException(farOver(maxModelLen, e.getMessage()));
        }
    }

    /** As {@link #parse(String, int)}, from the UTF-8 bytes readable in {@code body}. */
    public static ObjectNode parse(io.netty.buffer.ByteBuf body, int maxModelLen) {
        try {
            return HttpJson.object(body, BOUNDED.computeIfAbsent(maxModelLen, CompletionSchema::boundedMapper));
        } catch (HttpJson.BoundExceededException e) {
            throw new ModelLengthException(farOver(maxModelLen, e.getMessage()));
        }
    }

    /**
     * A look at a completion request's body while it arrives, under the bounds of {@link #parse(String, int)}: a body
     * that goes past them is refused with 400 {@code context_length_exceeded} as soon as the bytes that cross them
     * arrive, before the rest is read. One check per body.
     */
    public static dev.kvflux.serving.http.BodyCheck arriving(int maxModelLen) {
        return new ArrivingCompletion(BOUNDED.computeIfAbsent(maxModelLen, CompletionSchema::boundedMapper)
                .getFactory(), maxModelLen);
    }

    /** The message of a request refused while read, {@code bound} saying which bound it went past. */
    static String farOver(int maxModelLen, String bound) {
        return "this request is far over the model length of " + maxModelLen + " tokens (" + bound
                + "); shorten the prompt";
    }

    private static com.fasterxml.jackson.databind.ObjectMapper boundedMapper(int maxModelLen) {
        com.fasterxml.jackson.databind.ObjectMapper mapper = HttpJson.MAPPER.copy();
        mapper.getFactory().setStreamReadConstraints(com.fasterxml.jackson.core.StreamReadConstraints.builder()
                .maxStringLength((int) Math.min(Integer.MAX_VALUE, Math.max(1 << 16, 64L * maxModelLen)))
                .maxTokenCount(4L * maxModelLen + 4096)
                .build());
        return mapper;
    }

    /**
     * {@code request} checked against the schema, with a one-item list prompt replaced by its item.
     *
     * @throws IllegalArgumentException naming the first wrong field, what it holds and what it should hold
     */
    public static ObjectNode check(ObjectNode request, int maxModelLen) {
        ObjectNode checked = check(request);
        modelLength(promptTokens(checked.get("prompt")), maxTokens(request), maxModelLen);
        return checked;
    }

    /**
     * Refuses a request whose prompt and {@code max_tokens} together exceed {@code maxModelLen} tokens.
     *
     * @throws ModelLengthException saying the limit and what to change
     */
    public static void modelLength(int promptTokens, int maxTokens, int maxModelLen) {
        if ((long) promptTokens + maxTokens > maxModelLen) {
            throw new ModelLengthException("this request is " + promptTokens + " prompt tokens and " + maxTokens
                    + " max_tokens, " + ((long) promptTokens + maxTokens) + " in all, over the model length of "
                    + maxModelLen + " tokens; shorten the prompt or lower max_tokens");
        }
    }

    /**
     * As {@link #check(ObjectNode, int)} with no model length beyond the schema's own bounds.
     */
    public static ObjectNode check(ObjectNode request) {
        ObjectNode checked = request.deepCopy();
        JsonNode prompt = singlePrompt(present(request, "prompt"));
        promptTokens(prompt);
        checked.set("prompt", prompt);
        string(request, "model");
        maxTokens(request);
        boolean stream = stream(request);
        bool(request, "echo");
        JsonNode options = present(request, "stream_options");
        if (options != null) {
            if (!options.isObject()) {
                throw new IllegalArgumentException("stream_options must be an object, got " + kind(options));
            }
            if (!stream) {
                throw new IllegalArgumentException("stream_options is allowed only with \"stream\": true");
            }
        }
        NUMBER_RANGES.forEach((field, range) -> number(request, field, range[0], range[1]));
        integer(request, "n", 1, 1, "; this deployment answers one choice per request");
        integer(request, "best_of", 1, 1, "; this deployment answers one choice per request");
        integer(request, "logprobs", 0, 5, "");
        integer(request, "seed", Long.MIN_VALUE, Long.MAX_VALUE, "");
        string(request, "user");
        string(request, "suffix");
        stop(request);
        logitBias(request);
        return checked;
    }

    /**
     * The prompt's token count: a string's whitespace-separated words, or a list's token ids.
     *
     * @throws IllegalArgumentException if the prompt is missing, of another shape, or outside 1 to
     *     {@value #MAX_PROMPT_TOKENS} tokens
     */
    public static int promptTokens(JsonNode prompt) {
        int tokens;
        if (prompt != null && prompt.isTextual()) {
            tokens = words(prompt.asText());
        } else if (prompt != null && prompt.isArray()) {
            for (int i = 0; i < prompt.size(); i++) {
                JsonNode id = prompt.get(i);
                if (!id.isIntegralNumber() || !id.canConvertToInt() || id.asInt() < 0) {
                    throw new IllegalArgumentException("prompt is a list whose item " + i + " (" + abbreviate(id)
                            + ") is not a token id; give a string or a list of non-negative integers");
                }
            }
            tokens = prompt.size();
        } else {
            throw new IllegalArgumentException("prompt must be a string or a list of token ids, got " + kind(prompt));
        }
        if (tokens < 1 || tokens > MAX_PROMPT_TOKENS) {
            throw new IllegalArgumentException("prompt has " + tokens + " tokens; give 1 to " + MAX_PROMPT_TOKENS);
        }
        return tokens;
    }

    /**
     * {@code max_tokens}, or {@value #DEFAULT_MAX_TOKENS} when absent.
     *
     * @throws IllegalArgumentException if it is not an integer from 1 to {@value #MAX_TOKENS}
     */
    public static int maxTokens(JsonNode request) {
        JsonNode max = present(request, "max_tokens");
        if (max == null) {
            return DEFAULT_MAX_TOKENS;
        }
        if (!max.isIntegralNumber() || !max.canConvertToInt() || max.asInt() < 1 || max.asInt() > MAX_TOKENS) {
            throw new IllegalArgumentException("max_tokens must be an integer from 1 to " + MAX_TOKENS + ", got "
                    + abbreviate(max));
        }
        return max.asInt();
    }

    /**
     * {@code stream}, false when absent.
     *
     * @throws IllegalArgumentException if it is not a boolean
     */
    public static boolean stream(JsonNode request) {
        return bool(request, "stream");
    }

    /** A one-item list prompt as its item; batches of several prompts are refused, other shapes left as they are. */
    private static JsonNode singlePrompt(JsonNode prompt) {
        if (prompt == null || !prompt.isArray() || prompt.isEmpty()) {
            return prompt;
        }
        JsonNode first = prompt.get(0);
        if (!first.isTextual() && !first.isArray()) {
            return prompt;
        }
        if (prompt.size() > 1) {
            throw new IllegalArgumentException("prompt is a batch of " + prompt.size() + " prompts; send one prompt"
                    + " per request");
        }
        return first;
    }

    private static JsonNode present(JsonNode request, String field) {
        JsonNode value = request.get(field);
        return value == null || value.isNull() ? null : value;
    }

    private static boolean bool(JsonNode request, String field) {
        JsonNode value = present(request, field);
        if (value != null && !value.isBoolean()) {
            throw new IllegalArgumentException(field + " must be true or false, got " + abbreviate(value));
        }
        return value != null && value.asBoolean();
    }

    private static void string(JsonNode request, String field) {
        JsonNode value = present(request, field);
        if (value != null && !value.isTextual()) {
            throw new IllegalArgumentException(field + " must be a string, got " + kind(value));
        }
    }

    private static void number(JsonNode request, String field, double min, double max) {
        JsonNode value = present(request, field);
        if (value != null && (!value.isNumber() || !(value.asDouble() >= min && value.asDouble() <= max))) {
            throw new IllegalArgumentException(field + " must be a number from " + (int) min + " to " + (int) max
                    + ", got " + abbreviate(value));
        }
    }

    private static void integer(JsonNode request, String field, long min, long max, String why) {
        JsonNode value = present(request, field);
        if (value != null && (!value.isIntegralNumber() || !value.canConvertToLong() || value.asLong() < min
                || value.asLong() > max)) {
            throw new IllegalArgumentException(field + " must be " + (min == max ? String.valueOf(min)
                    : min == Long.MIN_VALUE ? "an integer" : "an integer from " + min + " to " + max) + ", got "
                    + abbreviate(value) + why);
        }
    }

    private static void stop(JsonNode request) {
        JsonNode stop = present(request, "stop");
        if (stop == null || stop.isTextual()) {
            return;
        }
        if (!stop.isArray() || stop.size() > 4) {
            throw new IllegalArgumentException("stop must be a string or a list of up to 4 strings, got " + kind(stop)
                    + (stop.isArray() ? " of " + stop.size() : ""));
        }
        for (JsonNode item : stop) {
            if (!item.isTextual()) {
                throw new IllegalArgumentException("stop must be a string or a list of up to 4 strings; it holds "
                        + kind(item));
            }
        }
    }

    private static void logitBias(JsonNode request) {
        JsonNode bias = present(request, "logit_bias");
        if (bias == null) {
            return;
        }
        if (!bias.isObject()) {
            throw new IllegalArgumentException("logit_bias must be an object of token ids to numbers, got " + kind(bias));
        }
        for (JsonNode value : bias) {
            if (!value.isNumber() || !(value.asDouble() >= -100 && value.asDouble() <= 100)) {
                throw new IllegalArgumentException("logit_bias values must be numbers from -100 to 100, got "
                        + abbreviate(value));
            }
        }
    }

    /** The whitespace-separated words of {@code text}: the simulated model's tokens. */
    static int words(String text) {
        int count = 0;
        boolean inWord = false;
        for (int i = 0; i < text.length(); i++) {
            boolean space = Character.isWhitespace(text.charAt(i));
            if (!space && !inWord) {
                count++;
            }
            inWord = !space;
        }
        return count;
    }

    private static String kind(JsonNode node) {
        return node == null ? "none" : node.getNodeType().toString().toLowerCase(Locale.ROOT);
    }

    /** The value as JSON, cut to 40 characters: a message must not echo a hostile client's megabytes. */
    private static String abbreviate(JsonNode value) {
        String text = value.toString();
        return text.length() <= 40 ? text : text.substring(0, 40) + "...";
    }
}
