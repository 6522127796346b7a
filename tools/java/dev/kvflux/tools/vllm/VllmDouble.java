package dev.kvflux.tools.vllm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.vllm.VllmPinger;
import dev.kvflux.serving.vllm.VllmRegistration;
import dev.kvflux.transfer.KvMode;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

/**
 * A stand-in for one vLLM MoRIIO instance: it registers with a proxy's discovery port as vLLM's connector does (a
 * ZeroMQ DEALER sending its msgpack registration), records every request it receives, and answers as vLLM does:
 * prefill with one token and its {@code kv_transfer_params}, decode with its tokens, streamed or not, in the
 * completions or the chat shape.
 */
public final class VllmDouble implements AutoCloseable {
    /** One request the double received. */
    public record Received(String path, String requestId, String dpRank, JsonNode body) {
    }

    private final Role role;
    private final DisposableServer http;
    private final VllmRegistration registration;
    private final List<Received> received = new CopyOnWriteArrayList<>();
    private final List<VllmPinger> pingers = new CopyOnWriteArrayList<>();
    /** Answer with this status instead of 200, when not 0. */
    public final AtomicInteger failWith = new AtomicInteger();
    /** Answer nothing, holding the request until its connection goes. */
    public final AtomicBoolean hold = new AtomicBoolean();
    /** How long to wait before answering, in milliseconds. */
    public final java.util.concurrent.atomic.AtomicLong answerDelayMillis = new java.util.concurrent.atomic.AtomicLong();
    /** Requests whose connection went away before their answer ended. */
    public final AtomicInteger cancelled = new AtomicInteger();
    /** The request ids whose answer this double sent whole. */
    public final java.util.Set<String> answered = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** The request ids this double failed (its {@link #failWith} status). */
    public final java.util.Set<String> failedIds = java.util.concurrent.ConcurrentHashMap.newKeySet();

    private VllmDouble(Role role, DisposableServer http, VllmRegistration registration) {
        this.role = role;
        this.http = http;
        this.registration = registration;
    }

    /** A double of {@code role} with {@code dpSize} data-parallel ranks, its ZeroMQ ports {@code zmqPorts}. */
    public static VllmDouble start(Role role, KvMode mode, int dpSize, int handshakePort, int notifyPort) {
        VllmDouble[] self = new VllmDouble[1];
        DisposableServer http = HttpServer.create().host("127.0.0.1").port(0)
                .route(r -> r.get("/health", (req, res) -> res.sendString(Mono.just("")))
                        .post("/v1/completions", (req, res) -> self[0].serve(req, res, false))
                        .post("/v1/chat/completions", (req, res) -> self[0].serve(req, res, true)))
                .bindNow();
        String zmq = "host:127.0.0.1,handshake:" + handshakePort + ",notify:" + notifyPort;
        VllmRegistration registration = new VllmRegistration(role, InetSocketAddress.createUnresolved("127.0.0.1",
                http.port()), zmq, "127.0.0.1", handshakePort, notifyPort, dpSize, 1, mode);
        self[0] = new VllmDouble(role, http, registration);
        return self[0];
    }

    /** Registers with the discovery port at {@code proxy} ({@code host:port}) every {@code every}. */
    public VllmDouble registerWith(String proxy, Duration every) {
        pingers.add(VllmPinger.start(proxy, registration, every));
        return this;
    }

    public VllmRegistration registration() {
        return registration;
    }

    /** The requests received so far, in order. */
    public List<Received> received() {
        return List.copyOf(received);
    }

    public int port() {
        return http.port();
    }

    private org.reactivestreams.Publisher<Void> serve(reactor.netty.http.server.HttpServerRequest req,
            reactor.netty.http.server.HttpServerResponse res, boolean chat) {
        return req.receive().aggregate().asString().defaultIfEmpty("{}")
                .delayUntil(text -> Mono.delay(Duration.ofMillis(answerDelayMillis.get())))
                .flatMap(text -> {
            JsonNode body = read(text);
            received.add(new Received(req.path().startsWith("/") ? req.path() : "/" + req.path(),
                    req.requestHeaders().get("X-Request-Id"), req.requestHeaders().get("X-data-parallel-rank"), body));
            String requestId = req.requestHeaders().get("X-Request-Id", "");
            if (failWith.get() != 0) {
                failedIds.add(requestId);
                return res.status(failWith.get()).sendString(Mono.just("{\"error\": {\"message\": \"double failed\"}}"))
                        .then();
            }
            if (hold.get()) {
                return Mono.<Void>never();
            }
            return answer(req, res, chat, body).doOnSuccess(done -> answered.add(requestId));
        }).doOnCancel(cancelled::incrementAndGet);
    }

    private Mono<Void> answer(reactor.netty.http.server.HttpServerRequest req,
            reactor.netty.http.server.HttpServerResponse res, boolean chat, JsonNode body) {
        if (role == Role.PREFILL) {
            ObjectNode answer = HttpJson.MAPPER.createObjectNode().put("id", "cmpl-p").put("object",
                    chat ? "chat.completion" : "text_completion");
            answer.putArray("choices").addObject().put("index", 0).put("text", " a");
            ObjectNode kv = answer.putObject("kv_transfer_params");
            kv.put("do_remote_prefill", true).put("do_remote_decode", false);
            kv.putArray("remote_block_ids").addArray().add(3).add(4);
            kv.put("remote_engine_id", "127.0.0.1:" + registration.handshakePort())
                    .put("remote_host", "127.0.0.1").put("remote_handshake_port", registration.handshakePort())
                    .put("remote_notify_port", registration.notifyPort()).put("remote_dp_size", 1)
                    .put("tp_size", 1).put("transfer_id", body.path("kv_transfer_params").path("transfer_id")
                            .asText("none"));
            return res.header("content-type", "application/json").sendString(Mono.just(HttpJson.write(answer)))
                    .then();
        }
        int tokens = Math.max(1, body.path("max_tokens").asInt(2));
        if (body.path("stream").asBoolean(false)) {
            return res.header("content-type", "text/event-stream")
                    .sendString(Flux.range(0, tokens).map(i -> "data: {\"t\": " + i + "}\n\n")
                            .concatWith(Mono.just("data: [DONE]\n\n"))).then();
        }
        return res.header("content-type", "application/json")
                .sendString(Mono.just("{\"id\": \"cmpl-d\", \"choices\": [{\"text\": \"done\"}]}")).then();
    }

    private static JsonNode read(String text) {
        try {
            return HttpJson.MAPPER.readTree(text);
        } catch (java.io.IOException e) {
            return HttpJson.MAPPER.missingNode();
        }
    }

    @Override
    public void close() {
        pingers.forEach(VllmPinger::close);
        http.disposeNow();
    }
}
