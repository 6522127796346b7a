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
        KvTransferParams params = KvTransferParams.from(json, self);
        return new CompletionRequest(CompletionSchema.promptTokens(json.get("prompt")), CompletionSchema.maxTokens(json),
                CompletionSchema.stream(json), params);
    }
}
