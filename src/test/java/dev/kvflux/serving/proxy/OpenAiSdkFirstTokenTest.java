package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.http.StreamResponse;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionCreateParams;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI Java SDK through kvflux's proxy with {@code --first-token prefill}, in front of kvflux's roles on the
 * simulated engine: completions and chat, streamed and not, get the answers they get without the mode, the SDK
 * checking each against OpenAI's schema; a streamed answer's first token reaches the client before decode's.
 */
class OpenAiSdkFirstTokenTest {
    /** A decode step of 300 ms: decode's first token comes well after prefill's answer. */
    private static final ServingModel SLOW_DECODE = new ServingModel("small", 1_000_000, 4096, 4,
            Duration.ofMillis(300), 16, 64);

    @Test
    void theSdkGetsTheAnswersItGetsWithoutTheModeAndTheFirstStreamedTokenIsPrefills() throws Exception {
        Map<String, Map<Handover.Stage, Long>> marks = new ConcurrentHashMap<>();
        Handover.Listener listener = (id, stage, at) -> marks.computeIfAbsent(id, k -> new ConcurrentHashMap<>())
                .put(stage, at);
        InstanceRegistry registry = new InstanceRegistry(Duration.ofMinutes(1));
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SLOW_DECODE).receiveDeadline(Duration.ofSeconds(10))
                     .handover(listener).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SLOW_DECODE).engine(engine).handover(listener)
                     .bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).firstToken(FirstToken.PREFILL)
                     .handover(listener).bindNow()) {
            registry.ping(prefill.instance());
            registry.ping(decode.instance());
            OpenAIClient client = OpenAIOkHttpClient.builder().baseUrl("http://127.0.0.1:" + proxy.address().getPort()
                    + "/v1").apiKey("sk-unused").maxRetries(0).timeout(Duration.ofSeconds(30)).build();
            try {
                Completion completion = client.completions().create(CompletionCreateParams.builder()
                        .model("small").prompt("a b c d").maxTokens(4).build());
                completion.validate();
                assertThat(completion.choices()).singleElement()
                        .satisfies(c -> assertThat(c.text()).isEqualTo(" t0 t1 t2 t3"));

                marks.clear();
                String streamed;
                try (StreamResponse<Completion> chunks = client.completions().createStreaming(
                        CompletionCreateParams.builder().model("small").prompt("a b c d").maxTokens(4).build())) {
                    streamed = chunks.stream().peek(c -> {
                        assertThat(c.id()).startsWith("cmpl-");
                        assertThat(c.model()).isEqualTo("small");
                    }).map(c -> c.choices().getFirst().text()).collect(Collectors.joining());
                }
                assertThat(streamed).isEqualTo(" t0 t1 t2 t3");
                Map<Handover.Stage, Long> request = marks.values().stream().findFirst().orElseThrow();
                assertThat(request.get(Handover.Stage.CLIENT_FIRST_BYTE)).as("the client's first byte: prefill's token,"
                        + " passed on before decode's first")
                        .isLessThan(request.get(Handover.Stage.FIRST_TOKEN_OUT));

                ChatCompletion chat = client.chat().completions().create(ChatCompletionCreateParams.builder()
                        .model("small").addUserMessage("a b c").maxCompletionTokens(3).build());
                chat.validate();
                assertThat(chat.choices()).singleElement()
                        .satisfies(c -> assertThat(c.message().content()).hasValue(" t0 t1 t2"));

                List<ChatCompletionChunk> deltas;
                try (StreamResponse<ChatCompletionChunk> chunks = client.chat().completions().createStreaming(
                        ChatCompletionCreateParams.builder().model("small").addUserMessage("a b c")
                                .maxCompletionTokens(3).build())) {
                    deltas = chunks.stream().peek(ChatCompletionChunk::validate).toList();
                }
                assertThat(deltas.getFirst().choices().getFirst().delta().role()).as("the first delta names the role")
                        .isPresent();
                assertThat(deltas.stream().flatMap(c -> c.choices().stream())
                        .map(c -> c.delta().content().orElse("")).collect(Collectors.joining()))
                        .isEqualTo(" t0 t1 t2");
            } finally {
                client.close();
            }
        }
    }
}
