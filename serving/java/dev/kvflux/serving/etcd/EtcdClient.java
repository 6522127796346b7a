package dev.kvflux.serving.etcd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.bindings.DurationText;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.transfer.notify.LogText;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelOption;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.ByteBufFlux;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.client.HttpClientResponse;
import reactor.netty.resources.ConnectionProvider;

/**
 * A small client of etcd's v3 JSON gateway ({@code POST /v3/...}, keys and values in base64, 64-bit numbers as
 * strings) over Reactor Netty's {@link HttpClient}: leases (grant, keep-alive, revoke), put, range over a prefix,
 * delete, a cheap liveness call and a streaming watch. It speaks HTTP/1.1 to the gateway every etcd 3.4+ serves on its
 * client port, so kvflux needs neither gRPC nor jetcd.
 *
 * <p>Everything read is bounded like any network input: an answer is read up to the caller's byte bound (64 KiB for
 * calls that return no keys) and a watch line up to its own, and an answer over its bound fails the call with
 * {@link EtcdException.Kind#MALFORMED} before more is buffered. Each call is given {@code requestTimeout} per endpoint;
 * an endpoint that refuses, resets, times out or answers UNAVAILABLE is skipped for the next one, in turn, and the
 * endpoint that last answered is tried first. When every endpoint failed the call errors with
 * {@link EtcdException.Kind#UNREACHABLE} naming the last cause; an error etcd answered (a lease it does not hold, say)
 * is {@link EtcdException.Kind#ANSWERED}. Calls emit on Reactor Netty's event loops. Thread-safe.
 */
public final class EtcdClient implements AutoCloseable {
    /** How long one endpoint gets to answer a call, by default. */
    public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(2);
    /** How long a connection attempt to one endpoint may take. */
    public static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(1);
    /** The largest answer read from a call that returns no keys (a lease, a put, a delete, a status). */
    public static final int MAX_SMALL_ANSWER_BYTES = 64 << 10;

    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder B64_DECODE = Base64.getDecoder();

    private final List<InetSocketAddress> endpoints;
    private final Duration requestTimeout;
    private final AtomicInteger preferred = new AtomicInteger();
    private final ConnectionProvider pool;
    private final HttpClient http;

    private EtcdClient(List<InetSocketAddress> endpoints, Duration requestTimeout) {
        this.endpoints = List.copyOf(endpoints);
        if (this.endpoints.isEmpty()) {
            throw new IllegalArgumentException("an etcd client needs at least one endpoint");
        }
        Objects.requireNonNull(requestTimeout, "requestTimeout");
        if (requestTimeout.isZero() || requestTimeout.isNegative()) {
            throw new IllegalArgumentException("the etcd request timeout must be positive, got "
                    + DurationText.of(requestTimeout));
        }
        this.requestTimeout = requestTimeout;
        // a watch holds one connection for its life; the calls beside it need a few more
        this.pool = HttpLimits.pool("kvflux-etcd").maxConnections(8).pendingAcquireMaxCount(64).build();
        this.http = HttpClient.create(pool)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) CONNECT_TIMEOUT.toMillis())
                .headers(h -> h.set(HttpHeaderNames.CONTENT_TYPE, "application/json"));
    }

    /** A client of {@code endpoints} with the {@link #DEFAULT_REQUEST_TIMEOUT}. */
    public static EtcdClient of(List<InetSocketAddress> endpoints) {
        return new EtcdClient(endpoints, DEFAULT_REQUEST_TIMEOUT);
    }

    /** A client of {@code endpoints} giving each endpoint {@code requestTimeout} per call. */
    public static EtcdClient of(List<InetSocketAddress> endpoints, Duration requestTimeout) {
        return new EtcdClient(endpoints, requestTimeout);
    }

    /** One key and its value as etcd holds it; {@code value} is empty in a delete event. */
    public record KeyValue(String key, byte[] value, long modRevision, long lease) {
    }

    /** A range's keys (at most the limit asked), the store's revision it was read at, and whether more matched. */
    public record Range(List<KeyValue> kvs, long revision, boolean more) {
    }

    /** One message of a watch. */
    public sealed interface WatchResponse {
        /** The watch is set up; {@code revision} is the store's revision then. */
        record Created(long revision) implements WatchResponse {
        }

        /** Changes under the watched prefix, in revision order; empty for a progress notice. */
        record Events(long revision, List<Event> events) implements WatchResponse {
        }

        /**
         * etcd ended the watch: the revision asked for is compacted ({@code compactRevision} > 0), or another
         * {@code reason}. Read the prefix again and watch from its revision.
         */
        record Canceled(long compactRevision, String reason) implements WatchResponse {
        }
    }

    /** A put or a delete of {@code kv.key()}. */
    public record Event(boolean delete, KeyValue kv) {
    }

    /**
     * A new lease of {@code ttl} (whole seconds; etcd raises a TTL below its minimum, 2 s with its default timing).
     *
     * @return the lease's id
     */
    public Mono<Long> grant(Duration ttl) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("TTL", Math.max(1, ttl.toSeconds()));
        return call("/v3/lease/grant", body, MAX_SMALL_ANSWER_BYTES).map(answer -> {
            long id = int64(answer, "ID");
            if (id == 0) {
                throw EtcdException.malformed("etcd granted no lease: " + LogText.escape(answer.path("error").asText("")));
            }
            return id;
        });
    }

    /**
     * Keeps {@code lease} alive once.
     *
     * @return the seconds it has left now; 0 when etcd no longer holds it (it expired or was revoked)
     */
    public Mono<Long> keepAlive(long lease) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("ID", Long.toString(lease));
        return call("/v3/lease/keepalive", body, MAX_SMALL_ANSWER_BYTES).map(answer -> {
            JsonNode result = answer.path("result");
            if (answer.has("error")) {
                throw EtcdException.answered(answer.path("error").path("grpc_code").asInt(-1),
                        "etcd refused the keep-alive: " + LogText.escape(answer.path("error").path("message").asText("")));
            }
            return Math.max(0, int64(result, "TTL"));
        });
    }

    /** Revokes {@code lease}, deleting every key put with it; completes too when etcd no longer holds it. */
    public Mono<Void> revoke(long lease) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("ID", Long.toString(lease));
        return call("/v3/lease/revoke", body, MAX_SMALL_ANSWER_BYTES)
                .onErrorResume(e -> e instanceof EtcdException etcd && etcd.leaseNotFound(), e -> Mono.empty())
                .then();
    }

    /**
     * Puts {@code value} at {@code key}, attached to {@code lease} (0: none), so that it is deleted when the lease ends.
     *
     * @return the store's revision after the put; errors with {@link EtcdException#leaseNotFound()} when the lease is
     *     gone
     */
    public Mono<Long> put(String key, byte[] value, long lease) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("key", b64(key)).put("value", B64.encodeToString(value));
        if (lease != 0) {
            body.put("lease", Long.toString(lease));
        }
        return call("/v3/kv/put", body, MAX_SMALL_ANSWER_BYTES).map(answer -> int64(answer.path("header"), "revision"));
    }

    /** Deletes {@code key}; emits how many keys were deleted (0 or 1). */
    public Mono<Long> delete(String key) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("key", b64(key));
        return call("/v3/kv/deleterange", body, MAX_SMALL_ANSWER_BYTES).map(answer -> int64(answer, "deleted"));
    }

    /**
     * The keys under {@code prefix}, at most {@code limit} of them, reading at most {@code maxBytes} of etcd's answer.
     */
    public Mono<Range> range(String prefix, int limit, int maxBytes) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("key", b64(prefix)).put("range_end", prefixEnd(prefix))
                .put("limit", limit);
        return call("/v3/kv/range", body, maxBytes).map(answer -> {
            List<KeyValue> kvs = new ArrayList<>();
            for (JsonNode kv : answer.path("kvs")) {
                kvs.add(keyValue(kv));
                if (kvs.size() > limit) {
                    throw EtcdException.malformed("etcd answered more keys than the " + limit + " asked for");
                }
            }
            return new Range(List.copyOf(kvs), int64(answer.path("header"), "revision"), answer.path("more").asBoolean());
        });
    }

    /** A cheap call that proves an endpoint is up and serving: emits the store's revision. */
    public Mono<Long> status() {
        return call("/v3/maintenance/status", HttpJson.MAPPER.createObjectNode(), MAX_SMALL_ANSWER_BYTES)
                .map(answer -> int64(answer.path("header"), "revision"));
    }

    /**
     * Watches the keys under {@code prefix} from {@code fromRevision} on: a {@link WatchResponse.Created} first, then
     * {@link WatchResponse.Events} as keys change, until etcd cancels it ({@link WatchResponse.Canceled}, after which
     * it completes), the connection ends (it completes, or errors with the cause) or it is cancelled. A line of the
     * stream over {@code maxLineBytes} errors. Only setting the watch up tries the endpoints in turn; a stream that
     * broke is not resumed, so read the prefix again and watch anew. The stream has no read timeout: a quiet watch is
     * a healthy one, and a caller that must notice a hung etcd calls {@link #status()} beside it.
     */
    public Flux<WatchResponse> watch(String prefix, long fromRevision, int maxLineBytes) {
        ObjectNode create = HttpJson.MAPPER.createObjectNode();
        create.putObject("create_request").put("key", b64(prefix)).put("range_end", prefixEnd(prefix))
                .put("start_revision", Long.toString(fromRevision));
        byte[] body = HttpJson.write(create).getBytes(StandardCharsets.UTF_8);
        return Flux.defer(() -> watchAt(body, preferred.get(), 0, maxLineBytes, null))
                .takeUntil(response -> response instanceof WatchResponse.Canceled);
    }

    private Flux<WatchResponse> watchAt(byte[] body, int first, int tried, int maxLineBytes, Throwable last) {
        if (tried == endpoints.size()) {
            return Flux.error(unreachable(last));
        }
        int index = Math.floorMod(first + tried, endpoints.size());
        AtomicBoolean answered = new AtomicBoolean();
        return http.post().uri(url(index, "/v3/watch"))
                .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body)))
                .response((response, content) -> {
                    answered.set(true);
                    if (response.status().code() != 200) {
                        return bounded(response, content, MAX_SMALL_ANSWER_BYTES)
                                .flatMap(bytes -> Mono.<WatchResponse>error(refusal(response.status().code(), bytes)));
                    }
                    preferred.set(index);
                    return JsonLines.split(content.asByteArray(), maxLineBytes).map(EtcdClient::watchResponse);
                })
                .onErrorResume(e -> !answered.get() && skipsEndpoint(e),
                        e -> watchAt(body, first, tried + 1, maxLineBytes, e));
    }

    private static WatchResponse watchResponse(byte[] line) {
        JsonNode message = json(line);
        if (message.has("error")) {
            JsonNode error = message.path("error");
            throw EtcdException.answered(error.path("grpc_code").asInt(-1), "etcd ended the watch: "
                    + LogText.escape(error.path("message").asText("")));
        }
        JsonNode result = message.path("result");
        if (!result.isObject()) {
            throw EtcdException.malformed("a watch message without a result");
        }
        long revision = int64(result.path("header"), "revision");
        if (result.path("canceled").asBoolean()) {
            return new WatchResponse.Canceled(int64(result, "compact_revision"),
                    LogText.escape(result.path("cancel_reason").asText("")));
        }
        if (result.path("created").asBoolean()) {
            return new WatchResponse.Created(revision);
        }
        List<Event> events = new ArrayList<>();
        for (JsonNode event : result.path("events")) {
            events.add(new Event("DELETE".equals(event.path("type").asText("PUT")), keyValue(event.path("kv"))));
        }
        return new WatchResponse.Events(revision, List.copyOf(events));
    }

    /** One call: tries the endpoints in turn, the last one that answered first. */
    private Mono<JsonNode> call(String path, ObjectNode request, int maxBytes) {
        byte[] body = HttpJson.write(request).getBytes(StandardCharsets.UTF_8);
        return Mono.defer(() -> callAt(path, body, maxBytes, preferred.get(), 0, null));
    }

    private Mono<JsonNode> callAt(String path, byte[] body, int maxBytes, int first, int tried, Throwable last) {
        if (tried == endpoints.size()) {
            return Mono.error(unreachable(last));
        }
        int index = Math.floorMod(first + tried, endpoints.size());
        return http.post().uri(url(index, path))
                .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body)))
                .response((response, content) -> bounded(response, content, maxBytes).map(bytes -> {
                    if (response.status().code() != 200) {
                        throw refusal(response.status().code(), bytes);
                    }
                    return json(firstLine(bytes));
                }))
                .single()
                .timeout(requestTimeout, Schedulers.parallel())
                .doOnNext(answer -> preferred.set(index))
                .onErrorResume(EtcdClient::skipsEndpoint, e -> callAt(path, body, maxBytes, first, tried + 1, e));
    }

    /** Whether a failure is the endpoint's (down, slow, leaderless), so that the next one is worth a try. */
    private static boolean skipsEndpoint(Throwable e) {
        if (e instanceof EtcdException etcd) {
            return etcd.kind() == EtcdException.Kind.ANSWERED && etcd.code() == EtcdException.UNAVAILABLE;
        }
        return e instanceof IOException || e instanceof TimeoutException || e.getCause() instanceof IOException;
    }

    private EtcdException unreachable(Throwable last) {
        String cause = last == null ? "no answer" : last.getMessage() != null ? last.getMessage()
                : last.getClass().getSimpleName();
        if (last instanceof TimeoutException) {
            cause = "no answer within " + requestTimeout.toMillis() + " ms";
        }
        return EtcdException.unreachable("etcd is unreachable at " + endpointsText() + " (last: "
                + LogText.escape(cause) + ")", last);
    }

    /** The endpoints as {@code host:port, ...}, for messages. */
    public String endpointsText() {
        StringBuilder text = new StringBuilder();
        for (InetSocketAddress endpoint : endpoints) {
            text.append(text.isEmpty() ? "" : ", ").append(LogText.hostPort(endpoint));
        }
        return text.toString();
    }

    private String url(int index, String path) {
        return "http://" + LogText.hostPort(endpoints.get(index)) + path;
    }

    /** The answer's bytes, up to {@code maxBytes}: a longer answer, declared or sent, errors before it is buffered. */
    private static Mono<byte[]> bounded(HttpClientResponse response, ByteBufFlux content, int maxBytes) {
        String declared = response.responseHeaders().get(HttpHeaderNames.CONTENT_LENGTH);
        if (declared != null) {
            try {
                if (Long.parseLong(declared.trim()) > maxBytes) {
                    return Mono.error(tooLarge(maxBytes));
                }
            } catch (NumberFormatException e) {
                return Mono.error(EtcdException.malformed("etcd's answer has a malformed content-length"));
            }
        }
        return content.asByteArray().collect(ByteArrayOutputStream::new, (out, chunk) -> {
            if ((long) out.size() + chunk.length > maxBytes) {
                throw tooLarge(maxBytes);
            }
            out.writeBytes(chunk);
        }).map(ByteArrayOutputStream::toByteArray);
    }

    private static EtcdException tooLarge(int maxBytes) {
        return EtcdException.malformed("etcd's answer is over the " + maxBytes + " bytes read");
    }

    /** etcd's error answer ({@code {"error", "message", "code"}}) as an exception. */
    private static EtcdException refusal(int status, byte[] bytes) {
        JsonNode answer;
        try {
            answer = HttpJson.MAPPER.readTree(bytes);
        } catch (IOException e) {
            return EtcdException.malformed("etcd answered HTTP " + status + " without its JSON error");
        }
        String message = answer == null ? "" : answer.path("message").asText(answer.path("error").asText(""));
        int code = answer == null ? -1 : answer.path("code").asInt(-1);
        return EtcdException.answered(code, "etcd answered HTTP " + status + ": " + LogText.escape(message));
    }

    /** A streamed answer (a keep-alive's) is one JSON message per line; the first is the answer. */
    private static byte[] firstLine(byte[] bytes) {
        for (int i = 0; i < bytes.length; i++) {
            if (bytes[i] == '\n') {
                return java.util.Arrays.copyOf(bytes, i);
            }
        }
        return bytes;
    }

    private static JsonNode json(byte[] bytes) {
        JsonNode node;
        try {
            node = HttpJson.MAPPER.readTree(bytes);
        } catch (IOException e) {
            throw EtcdException.malformed("etcd's answer is not JSON");
        }
        if (node == null || !node.isObject()) {
            throw EtcdException.malformed("etcd's answer is not a JSON object");
        }
        return node;
    }

    private static KeyValue keyValue(JsonNode kv) {
        return new KeyValue(new String(base64(kv, "key"), StandardCharsets.UTF_8), base64(kv, "value"),
                int64(kv, "mod_revision"), int64(kv, "lease"));
    }

    private static byte[] base64(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null) {
            return new byte[0];
        }
        try {
            return B64_DECODE.decode(value.asText());
        } catch (IllegalArgumentException e) {
            throw EtcdException.malformed("etcd's \"" + field + "\" is not base64");
        }
    }

    /**
     * A 64-bit number of the gateway's JSON: a string of digits (or a plain number); 0 when absent, as the gateway
     * leaves out zero values.
     */
    private static long int64(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) {
            return 0;
        }
        if (value.isIntegralNumber() && value.canConvertToLong()) {
            return value.asLong();
        }
        try {
            return Long.parseLong(value.asText());
        } catch (NumberFormatException e) {
            throw EtcdException.malformed("etcd's \"" + field + "\" is not a 64-bit integer");
        }
    }

    private static String b64(String key) {
        return B64.encodeToString(key.getBytes(StandardCharsets.UTF_8));
    }

    /** The range end that makes a range over every key starting with {@code prefix}, in base64. */
    private static String prefixEnd(String prefix) {
        byte[] end = prefix.getBytes(StandardCharsets.UTF_8);
        for (int i = end.length - 1; i >= 0; i--) {
            if (end[i] != (byte) 0xff) {
                end[i]++;
                return B64.encodeToString(java.util.Arrays.copyOf(end, i + 1));
            }
        }
        return B64.encodeToString(new byte[] {0}); // every key
    }

    /** Closes the client's connections; calls in progress fail. */
    @Override
    public void close() {
        pool.dispose();
    }
}
