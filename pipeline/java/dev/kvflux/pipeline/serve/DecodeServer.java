package dev.kvflux.pipeline.serve;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.pipeline.net.ExpectedTransfers;
import dev.kvflux.pipeline.net.NotifyAuth;
import dev.kvflux.pipeline.net.NotifyClient;
import dev.kvflux.pipeline.net.NotifyMessage;
import dev.kvflux.pipeline.net.NotifyMetrics;
import dev.kvflux.pipeline.net.NotifyServer;
import dev.kvflux.pipeline.net.ReceiveDeadlineException;
import dev.kvflux.pipeline.net.RemoteWriteFailedException;
import dev.kvflux.pipeline.proxy.HttpJson;
import dev.kvflux.pipeline.proxy.HttpLimits;
import dev.kvflux.pipeline.proxy.Instance;
import dev.kvflux.pipeline.proxy.Role;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * A simulated decode instance. For each {@code POST /v1/completions} that came through the proxy it
 * expects the request's transfer, sends prefill the blocks it allocated ({@code remote_blocks}), waits for
 * {@code write_done}, then decodes {@code max_tokens} tokens, one per decode step, streamed as
 * server-sent events when {@code stream} is true.
 *
 * <p>When prefill reports {@code write_failed}, the request fails with 503 and an OpenAI-style error
 * naming prefill's code and reason; when the receive deadline passes first, with 504; a request whose
 * transfer id is already in use, with 409. With a receive deadline, {@code remote_blocks} is retried for
 * half of it (prefill needs the rest to write and notify); if it cannot be delivered by then the request
 * fails at once with 503 ({@code REMOTE_BLOCKS_UNDELIVERABLE}) rather than waiting out the deadline for a
 * KV that prefill was never told where to write. Without a receive deadline (vLLM's behaviour before
 * kvflux) an undeliverable {@code remote_blocks} is only counted and logged, and a request whose notice
 * never comes waits until its client gives up. {@code GET /health} answers 200; {@code GET /metrics} gives the notify channel's counters.
 */
public final class DecodeServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DecodeServer.class);
    private static final int BLOCK_CAPACITY = 1 << 16;
    /** How long remote_blocks is retried without a receive deadline (as long as prefill's defer timeout). */
    private static final Duration LEGACY_BLOCKS_WITHIN = Duration.ofSeconds(60);

    private final DisposableServer http;
    private final NotifyServer notify;
    private final NotifyClient client;
    private final ExpectedTransfers expected;
    private final String host;
    private final NotifyAuth auth;
    private Disposable pinger = reactor.core.Disposables.disposed();

    private DecodeServer(DisposableServer http, NotifyServer notify, NotifyClient client, ExpectedTransfers expected,
            String host, NotifyAuth auth) {
        this.http = http;
        this.notify = notify;
        this.client = client;
        this.expected = expected;
        this.host = host;
        this.auth = auth;
    }

    /**
     * Starts a decode instance. Blocks the calling thread until its ports are bound (up to about 10 s), so it
     * must not be called on a Reactor non-blocking thread (a Netty event loop, {@code Schedulers.parallel()});
     * from a reactive chain, call it on {@code Schedulers.boundedElastic()}.
     *
     * @param receiveDeadline how long a request waits for its transfer's notice; {@code null} for no deadline
     * @throws IllegalStateException if a port cannot be bound, or at once, with nothing bound, if called on a
     *     non-blocking thread
     */
    public static DecodeServer start(RoleAddresses where, ServingModel model, Duration receiveDeadline) {
        return start(where, model, receiveDeadline, null);
    }

    /**
     * As {@link #start(RoleAddresses, ServingModel, Duration)}, signing its notifications and accepting only
     * signed ones with {@code auth}; {@code null} for none. Blocks as that does: not on a non-blocking thread.
     */
    public static DecodeServer start(RoleAddresses where, ServingModel model, Duration receiveDeadline,
            NotifyAuth auth) {
        Blocking.requireBlockingAllowed("DecodeServer.start");
        Objects.requireNonNull(where, "where");
        Objects.requireNonNull(model, "model");
        NotifyMetrics metrics = new NotifyMetrics();
        ExpectedTransfers expected = (receiveDeadline == null
                ? ExpectedTransfers.withoutDeadline()
                : ExpectedTransfers.withDeadline(receiveDeadline)).metrics(metrics);
        NotifyServer notify = NotifyServer.builder().host(where.host()).port(where.notifyPort())
                .metrics(metrics).auth(auth).handler(expected).bind().block(Duration.ofSeconds(10));
        NotifyClient client = NotifyClient.builder().metrics(metrics).auth(auth).build();
        Handler handler = new Handler(model, expected, client, new KvCache(model, BLOCK_CAPACITY),
                receiveDeadline != null ? receiveDeadline.dividedBy(2) : LEGACY_BLOCKS_WITHIN, receiveDeadline != null);
        try {
            DisposableServer http = HttpLimits.server(where.host(), where.httpPort())
                    .route(routes -> routes.post("/v1/completions", handler::completions)
                            .get("/health", (req, res) -> res.sendString(Mono.just("{\"status\":\"ok\"}")))
                            .get("/metrics", (req, res) -> HttpJson.reply(res, HttpResponseStatus.OK,
                                    HttpJson.MAPPER.valueToTree(metrics.snapshot()))))
                    .bindNow();
            DecodeServer server = new DecodeServer(http, notify, client, expected, where.host(), auth);
            LOG.info("decode listening: http {}, notify {} ({}), model {}, receive deadline {}",
                    Instance.hostPort(server.httpAddress()), Instance.hostPort(server.notifyAddress()),
                    auth == null ? "unsigned" : "signed", model,
                    receiveDeadline == null ? "none" : receiveDeadline.toMillis() + " ms");
            return server;
        } catch (RuntimeException e) {
            notify.close();
            client.close();
            throw new IllegalStateException("cannot start decode's HTTP server on " + where.host() + ":"
                    + where.httpPort() + ": " + HttpLimits.bindFailure(where.host(), where.httpPort(), e), e);
        }
    }

    /** Registers with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    public DecodeServer pingProxy(String proxyBaseUrl, Duration interval) {
        pinger.dispose();
        pinger = InstancePinger.start(proxyBaseUrl, instance(), interval, auth);
        return this;
    }

    /** This instance as the proxy knows it. */
    public Instance instance() {
        return new Instance(Role.DECODE, httpAddress(), notifyAddress());
    }

    public InetSocketAddress httpAddress() {
        return InetSocketAddress.createUnresolved(host, ((InetSocketAddress) http.address()).getPort());
    }

    public InetSocketAddress notifyAddress() {
        return InetSocketAddress.createUnresolved(host, notify.address().getPort());
    }

    /** The notify channel's counters (write_done, write_failed, deadlines, late notices, bad frames). */
    public NotifyMetrics metrics() {
        return expected.metrics();
    }

    @Override
    public void close() {
        pinger.dispose();
        http.disposeNow();
        notify.close();
        client.close();
    }

    /** Prefill could not be given the request's block list, so it cannot write and the KV will never come. */
    private static final class BlocksUndeliverableException extends RuntimeException {
        BlocksUndeliverableException(String transferId, InetSocketAddress prefill, Duration within) {
            super("decode could not deliver its block list (remote_blocks) for transfer " + transferId
                    + " to prefill's notify address " + Instance.hostPort(prefill) + " within " + within.toMillis()
                    + " ms, so prefill cannot write this request's KV; check that prefill is running and that its"
                    + " notify port is reachable from decode, then retry", null, false, false);
        }
    }

    /**
     * @param blocksWithin how long remote_blocks is retried towards prefill
     * @param failWhenUndeliverable whether a request whose remote_blocks could not be delivered fails at once
     *     (with a receive deadline) or keeps waiting for its notice (without one, as vLLM does)
     */
    private record Handler(ServingModel model, ExpectedTransfers expected, NotifyClient client, KvCache cache,
                           Duration blocksWithin, boolean failWhenUndeliverable) {

        Publisher<Void> completions(HttpServerRequest request, HttpServerResponse response) {
            return HttpJson.withBody(request, response, body -> serve(body, response));
        }

        private Publisher<Void> serve(String body, HttpServerResponse response) {
            CompletionRequest request;
            try {
                ObjectNode json = HttpJson.object(body);
                request = CompletionRequest.parse(json, Role.DECODE);
            } catch (IllegalArgumentException e) {
                return HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                        "bad_request", e.getMessage());
            }
            String id = request.params().transferId();
            List<Long> blocks = cache.allocate(model.blocksFor(request.promptTokens()));
            InetSocketAddress prefill = request.params().remoteNotify();
            Mono<Void> askForKv = client.send(prefill, new NotifyMessage.RemoteBlocks(id, id, blocks, 0), blocksWithin)
                    .flatMap(delivered -> delivered || !failWhenUndeliverable ? Mono.<Void>empty()
                            : Mono.error(new BlocksUndeliverableException(id, prefill, blocksWithin)));
            // expect() registers the transfer when subscribed, before remote_blocks lets prefill write
            return Mono.when(expected.expect(id), askForKv)
                    .then(Mono.defer(() -> Mono.from(decode(request, response))))
                    .onErrorResume(RemoteWriteFailedException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "kv_transfer_failed", e.code().name(),
                            e.getMessage())))
                    .onErrorResume(BlocksUndeliverableException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "kv_transfer_failed", "REMOTE_BLOCKS_UNDELIVERABLE",
                            e.getMessage())))
                    .onErrorResume(ReceiveDeadlineException.class, e -> Mono.from(HttpJson.error(response,
                            HttpResponseStatus.GATEWAY_TIMEOUT, "kv_transfer_timeout", "RECEIVE_DEADLINE",
                            e.getMessage())))
                    // expect() refuses a transfer id that is already waiting or finished
                    .onErrorResume(e -> e instanceof IllegalStateException && !response.hasSentHeaders(),
                            e -> Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT,
                                    "invalid_request_error", "duplicate_transfer_id", e.getMessage())));
        }

        private Publisher<Void> decode(CompletionRequest request, HttpServerResponse response) {
            String id = "cmpl-" + request.params().transferId();
            if (!request.stream()) {
                return Mono.delay(model.decodeStep().multipliedBy(request.maxTokens()), Schedulers.parallel())
                        .flatMap(tick -> Mono.from(HttpJson.reply(response, HttpResponseStatus.OK,
                                completion(id, request))));
            }
            Flux<String> events = Flux.interval(model.decodeStep(), Schedulers.parallel())
                    .take(request.maxTokens())
                    .map(i -> "data: " + HttpJson.write(chunk(id, i, i == request.maxTokens() - 1)) + "\n\n")
                    .concatWith(Mono.just("data: [DONE]\n\n"));
            return response.header(HttpHeaderNames.CONTENT_TYPE, "text/event-stream")
                    .sendString(events, StandardCharsets.UTF_8)
                    .then();
        }

        private static ObjectNode chunk(String id, long index, boolean last) {
            ObjectNode chunk = HttpJson.MAPPER.createObjectNode().put("id", id).put("object", "text_completion");
            ObjectNode choice = chunk.putArray("choices").addObject();
            choice.put("index", 0).put("text", " t" + index);
            if (last) {
                choice.put("finish_reason", "length");
            } else {
                choice.putNull("finish_reason");
            }
            return chunk;
        }

        private static ObjectNode completion(String id, CompletionRequest request) {
            StringBuilder text = new StringBuilder();
            for (int i = 0; i < request.maxTokens(); i++) {
                text.append(" t").append(i);
            }
            ObjectNode body = HttpJson.MAPPER.createObjectNode().put("id", id).put("object", "text_completion");
            body.putArray("choices").addObject().put("index", 0).put("text", text.toString())
                    .put("finish_reason", "length");
            body.putObject("usage").put("prompt_tokens", request.promptTokens())
                    .put("completion_tokens", request.maxTokens())
                    .put("total_tokens", request.promptTokens() + request.maxTokens());
            return body;
        }
    }
}
