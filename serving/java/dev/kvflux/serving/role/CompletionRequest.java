package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.Role;

/**
 * The parts of an OpenAI-style completion request the simulated roles use. The prompt's token count is
 * its number of whitespace-separated words for a string prompt, or its length for a list of token ids.
 */
record CompletionRequest(int promptTokens, int maxTokens, boolean stream, KvTransferParams params) {

    /**
     * Reads a request that an instance of {@code self} received, with the proxy's checks
     * ({@link CompletionSchema}) for the fields it uses.
     *
     * @throws IllegalArgumentException saying what is wrong
     */
    static CompletionRequest parse(ObjectNode json, Role self) {
        return parse(json, self, Integer.MAX_VALUE);
    }

    /**
     * As {@link #parse(ObjectNode, Role)}, refusing a request longer than {@code maxModelLen} tokens.
     *
     * @throws CompletionSchema.ModelLengthException if prompt and max_tokens exceed {@code maxModelLen}
     */
    static CompletionRequest parse(ObjectNode json, Role self, int maxModelLen) {
        KvTransferParams params = KvTransferParams.from(json, self);
        CompletionRequest request = new CompletionRequest(CompletionSchema.promptTokens(json.get("prompt")),
                CompletionSchema.maxTokens(json), CompletionSchema.stream(json), params);
        CompletionSchema.modelLength(request.promptTokens(), request.maxTokens(), maxModelLen);
        return request;
    }
}
