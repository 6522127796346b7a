package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.ChatSchema;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.KvTransferParams;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.vllm.VllmRequests;

/**
 * The parts of an OpenAI-style completion request the simulated roles use. The prompt's token count is
 * its number of whitespace-separated words for a string prompt (or the messages' texts, for chat), or its length for
 * a list of token ids. A request in vLLM's shape ({@code vllmShaped}, from vLLM's proxy) names its peer in its request
 * id ({@link VllmRequests}); kvflux's own proxy names it in {@code kv_transfer_params.remote_notify}.
 *
 * @param chat whether it came on {@code /v1/chat/completions}
 * @param vllmShaped whether its {@code kv_transfer_params} are vLLM's
 * @param model the request's {@code model}, null when it named none
 * @param created when it arrived, in seconds since the epoch: its answer's {@code created}
 */
record CompletionRequest(int promptTokens, int maxTokens, boolean stream, KvTransferParams params, boolean chat,
                         boolean vllmShaped, String model, long created) {

    CompletionRequest(int promptTokens, int maxTokens, boolean stream, KvTransferParams params) {
        this(promptTokens, maxTokens, stream, params, false, false, null, System.currentTimeMillis() / 1000);
    }

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
        return parse(json, self, maxModelLen, false, null);
    }

    /**
     * As {@link #parse(ObjectNode, Role, int)}, for the API the request came on ({@code chat}), with its
     * {@code X-Request-Id} ({@code requestId}, null when none), where a request from vLLM's proxy names its peer.
     */
    static CompletionRequest parse(ObjectNode json, Role self, int maxModelLen, boolean chat, String requestId) {
        boolean vllm = VllmRequests.vllmShaped(json);
        KvTransferParams params = vllm ? VllmRequests.params(json, self, requestId) : KvTransferParams.from(json, self);
        String model = json.path("model").isTextual() ? json.get("model").asText() : null;
        long created = System.currentTimeMillis() / 1000;
        CompletionRequest request = chat
                ? new CompletionRequest(ChatSchema.promptTokens(json), ChatSchema.maxTokens(json),
                        CompletionSchema.stream(json), params, true, vllm, model, created)
                : new CompletionRequest(CompletionSchema.promptTokens(json.get("prompt")),
                        CompletionSchema.maxTokens(json), CompletionSchema.stream(json), params, false, vllm, model,
                        created);
        CompletionSchema.modelLength(request.promptTokens(), request.maxTokens(), maxModelLen);
        return request;
    }
}
