package dev.kvflux.serving.api;

/** The two OpenAI APIs the proxy and the roles serve, by their paths. */
public enum CompletionApi {
    /** {@code POST /v1/completions}: a prompt. */
    COMPLETIONS("/v1/completions"),
    /** {@code POST /v1/chat/completions}: a list of messages. */
    CHAT("/v1/chat/completions");

    private final String path;

    CompletionApi(String path) {
        this.path = path;
    }

    /** The path, {@code /v1/...}. */
    public String path() {
        return path;
    }

    /** The path after {@code /v1}, as vLLM's proxy appends it to an instance's address. */
    public String subPath() {
        return path.substring("/v1".length());
    }
}
