package dev.kvflux.serving.vllm;

import static org.assertj.core.api.Assertions.assertThat;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionCreateParams;
import dev.kvflux.tools.vllm.ToyProxy;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.notify.NotifyEvent;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The OpenAI Java SDK, as a user's client, through vLLM's toy proxy (and through kvflux's proxy taking vLLM
 * registrations) in front of kvflux's roles on the simulated engine: completions and chat, streamed and not, in WRITE
 * and READ. The SDK validates every answer and chunk against OpenAI's schema, so a field its types require (an id,
 * {@code created}, {@code model}, a choice's {@code finish_reason}) missing from what the roles send fails here.
 * Chat goes with {@code max_tokens} through the toy proxy, which fails a request that has only
 * {@code max_completion_tokens} (the SDK's current field), and with {@code max_completion_tokens} through kvflux's.
 */
// real processes (role JVMs, etcd, a Python proxy) start and stop in each test, which takes minutes on a loaded
// 2-core host; the claims are about what ended how, not how soon, so the bound is only a guard against a hang
@org.junit.jupiter.api.Timeout(value = 5, unit = java.util.concurrent.TimeUnit.MINUTES)
class OpenAiSdkBehindVllmProxyTest {
    @TempDir
    static Path work;

    /** Reads the fields every chunk must have: the SDK throws on one missing. */
    private static void readHead(Completion chunk) {
        assertThat(chunk.id()).startsWith("cmpl-");
        assertThat(chunk.model()).isEqualTo("small");
        assertThat(chunk.created()).isPositive();
        assertThat(chunk.choices()).singleElement().satisfies(c -> assertThat(c.index()).isZero());
    }

    @SuppressWarnings("deprecation") // max_tokens on chat: the field vLLM's toy proxy needs
    @ParameterizedTest(name = "behind the {0} proxy, {1}")
    @MethodSource("dev.kvflux.serving.vllm.RolesBehindVllmProxyTest#cases")
    void theOpenAiSdkGetsValidAnswersFromKvfluxsRolesBehindAVllmStyleProxy(String proxyKind, KvMode mode)
            throws Exception {
        if (proxyKind.equals("toy")) {
            String why = ToyProxy.unavailable();
            Assumptions.assumeTrue(why == null, () -> "vLLM's toy proxy cannot run here: " + why);
        }
        try (RolesBehindVllmProxyTest.Stack stack = RolesBehindVllmProxyTest.Stack.start(proxyKind, mode, work)) {
            OpenAIClient client = OpenAIOkHttpClient.builder().baseUrl("http://127.0.0.1:" + stack.front().port() + "/v1")
                    .apiKey("sk-unused").maxRetries(0).timeout(Duration.ofSeconds(30)).build();
            try {
                Completion completion = client.completions().create(CompletionCreateParams.builder()
                        .model("small").prompt("a b c d").maxTokens(5).build());
                completion.validate();
                // decode is asked for max_tokens - 1 tokens and answers the client, as vLLM's proxy has it
                assertThat(completion.choices()).singleElement()
                        .satisfies(c -> assertThat(c.text()).isEqualTo(" t0 t1 t2 t3"));

                String streamed;
                try (StreamResponse<Completion> chunks = client.completions().createStreaming(
                        CompletionCreateParams.builder().model("small").prompt("a b c d").maxTokens(5).build())) {
                    // not validate(): the SDK types a completion chunk as a whole completion, whose finish_reason is
                    // required, though OpenAI's own streams send null until the last chunk; its other fields are read
                    streamed = chunks.stream().peek(OpenAiSdkBehindVllmProxyTest::readHead)
                            .map(c -> c.choices().getFirst().text()).collect(Collectors.joining());
                }
                assertThat(streamed).as("the streamed completion, decode's").isEqualTo(" t0 t1 t2 t3");

                ChatCompletionCreateParams.Builder chatParams = ChatCompletionCreateParams.builder().model("small")
                        .addUserMessage("a b c");
                if (proxyKind.equals("toy")) {
                    chatParams.maxTokens(4);
                } else {
                    chatParams.maxCompletionTokens(4);
                }
                ChatCompletion chat = client.chat().completions().create(chatParams.build());
                chat.validate();
                // max_completion_tokens goes to decode unchanged (through vLLM's proxy too, where max_tokens is given)
                assertThat(chat.choices()).singleElement().satisfies(c -> assertThat(c.message().content())
                        .hasValue(proxyKind.equals("toy") ? " t0 t1 t2" : " t0 t1 t2 t3"));

                List<ChatCompletionChunk> deltas;
                try (StreamResponse<ChatCompletionChunk> chunks = client.chat().completions().createStreaming(
                        ChatCompletionCreateParams.builder().model("small").addUserMessage("a b c").maxTokens(4)
                                .build())) {
                    deltas = chunks.stream().peek(ChatCompletionChunk::validate).toList();
                }
                assertThat(deltas.stream().flatMap(c -> c.choices().stream())
                        .map(c -> c.delta().content().orElse("")).collect(Collectors.joining()))
                        .isEqualTo(" t0 t1 t2");
            } finally {
                client.close();
            }
            assertThat(stack.decode().notifyMeters().count(NotifyEvent.RECEIVED))
                    .as("notifications decode took from prefill, one per request").isGreaterThanOrEqualTo(4);
        }
    }
}
