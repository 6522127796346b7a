package dev.kvflux.pipeline.serve;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.pipeline.proxy.KvTransferParams;
import dev.kvflux.pipeline.proxy.Role;

/**
 * The parts of an OpenAI-style completion request the simulated roles use. The prompt's token count is
 * its number of whitespace-separated words for a string prompt, or its length for a list of token ids.
 */
record CompletionRequest(int promptTokens, int maxTokens, boolean stream, KvTransferParams params) {

    /** The default {@code max_tokens}, as OpenAI's API. */
    static final int DEFAULT_MAX_TOKENS = 16;
    /** The longest prompt the simulation accepts. */
    static final int MAX_PROMPT_TOKENS = 1 << 20;

    /**
     * Reads a request that an instance of {@code self} received.
     *
     * @throws IllegalArgumentException saying what is wrong
     */
    static CompletionRequest parse(ObjectNode json, Role self) {
        KvTransferParams params = KvTransferParams.from(json, self);
        int tokens = promptTokens(json.get("prompt"));
        JsonNode max = json.get("max_tokens");
        int maxTokens = DEFAULT_MAX_TOKENS;
        if (max != null && !max.isNull()) {
            if (!max.isIntegralNumber() || !max.canConvertToInt() || max.asInt() < 1 || max.asInt() > 65_536) {
                throw new IllegalArgumentException("max_tokens must be an integer from 1 to 65536, got " + max);
            }
            maxTokens = max.asInt();
        }
        JsonNode stream = json.get("stream");
        if (stream != null && !stream.isNull() && !stream.isBoolean()) {
            throw new IllegalArgumentException("stream must be true or false, got " + stream);
        }
        return new CompletionRequest(tokens, maxTokens, stream != null && stream.asBoolean(false), params);
    }

    private static int promptTokens(JsonNode prompt) {
        int tokens;
        if (prompt != null && prompt.isTextual()) {
            tokens = words(prompt.asText());
        } else if (prompt != null && prompt.isArray()) {
            for (int i = 0; i < prompt.size(); i++) {
                if (!prompt.get(i).isIntegralNumber()) {
                    throw new IllegalArgumentException("prompt is a list whose item " + i + " (" + prompt.get(i)
                            + ") is not a token id; give a string or a list of integers");
                }
            }
            tokens = prompt.size();
        } else {
            throw new IllegalArgumentException("prompt must be a string or a list of token ids, got "
                    + (prompt == null ? "none" : prompt.getNodeType().toString().toLowerCase(java.util.Locale.ROOT)));
        }
        if (tokens < 1 || tokens > MAX_PROMPT_TOKENS) {
            throw new IllegalArgumentException("prompt has " + tokens + " tokens; give 1 to " + MAX_PROMPT_TOKENS);
        }
        return tokens;
    }

    private static int words(String text) {
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
}
