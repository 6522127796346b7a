package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.http.HttpJson;
import java.net.InetSocketAddress;

/**
 * The simulated model's answers, in the OpenAI shapes of the API the request came on: completions
 * ({@code text_completion}, {@code choices[].text}) or chat ({@code chat.completion}, {@code choices[].message};
 * streamed, {@code chat.completion.chunk} with {@code delta}). Token {@code i} is the text {@code " t<i>"}. Each
 * answer and chunk has the fields OpenAI's SDKs require: {@code id}, {@code object}, {@code created} and
 * {@code model} (the request's, else the served model's name).
 */
final class Answers {
    private Answers() {
    }

    /** The id of a request's answer. */
    static String id(CompletionRequest request) {
        return (request.chat() ? "chatcmpl-" : "cmpl-") + request.params().transferId();
    }

    private static ObjectNode head(CompletionRequest request, String served, String object) {
        return HttpJson.MAPPER.createObjectNode().put("id", id(request)).put("object", object)
                .put("created", request.created()).put("model", request.model() != null ? request.model() : served);
    }

    /** Streamed token {@code index} of a model named {@code served}, the last one saying why the answer ended. */
    static ObjectNode chunk(CompletionRequest request, String served, long index, boolean last) {
        ObjectNode chunk = head(request, served, request.chat() ? "chat.completion.chunk" : "text_completion");
        ObjectNode choice = chunk.putArray("choices").addObject().put("index", 0);
        if (request.chat()) {
            ObjectNode delta = choice.putObject("delta");
            if (index == 0) {
                delta.put("role", "assistant");
            }
            delta.put("content", " t" + index);
        } else {
            choice.put("text", " t" + index);
        }
        if (last) {
            choice.put("finish_reason", "length");
        } else {
            choice.putNull("finish_reason");
        }
        return chunk;
    }

    /** The whole answer of {@code tokens} tokens, of a model named {@code served}. */
    static ObjectNode completion(CompletionRequest request, String served, int tokens) {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < tokens; i++) {
            text.append(" t").append(i);
        }
        ObjectNode body = head(request, served, request.chat() ? "chat.completion" : "text_completion");
        ObjectNode choice = body.putArray("choices").addObject().put("index", 0);
        if (request.chat()) {
            choice.putObject("message").put("role", "assistant").put("content", text.toString());
        } else {
            choice.put("text", text.toString());
        }
        choice.put("finish_reason", "length");
        body.putObject("usage").put("prompt_tokens", request.promptTokens()).put("completion_tokens", tokens)
                .put("total_tokens", request.promptTokens() + tokens);
        return body;
    }

    /**
     * Prefill's answer, its one token; to a request in vLLM's shape, with the {@code kv_transfer_params} vLLM's proxy
     * hands decode in READ mode (this instance's notify address standing for its engine: kvflux's roles find each
     * other's KV regions through their own notifications).
     */
    static ObjectNode firstToken(CompletionRequest request, String served, InetSocketAddress notify, int tp) {
        ObjectNode body = completion(request, served, 1);
        if (request.vllmShaped()) {
            ObjectNode kv = body.putObject("kv_transfer_params");
            kv.put("do_remote_prefill", true).put("do_remote_decode", false);
            kv.putArray("remote_block_ids").addArray();
            kv.put("remote_engine_id", Instance.hostPort(notify)).put("remote_host", notify.getHostString())
                    .put("remote_handshake_port", notify.getPort()).put("remote_notify_port", notify.getPort())
                    .put("remote_dp_size", 1).put("tp_size", tp).put("transfer_id", request.params().transferId());
        }
        return body;
    }
}
