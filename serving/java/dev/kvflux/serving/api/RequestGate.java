package dev.kvflux.serving.api;

import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.HttpResponseStatus;
import dev.kvflux.serving.http.BodyBudget;
import dev.kvflux.serving.http.BodyReader;
import java.security.MessageDigest;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * What a role lets through to its handler: with a notify secret, only requests the proxy signed for this instance
 * ({@link RequestAuth}), each once ({@link ReplayWindow}). An unsigned, malformed, stale, misdirected, forged or replayed
 * request is answered 401 from its headers alone, before a byte of its body is kept, and its connection is closed
 * soon after the answer; a body that is not the one signed is answered 401 once read, before anything parses it. Without
 * a secret (a role bound to loopback) every request passes, unsigned, with the client key it names, if any. Every
 * body is read within the process's {@link BodyBudget}.
 */
public final class RequestGate {
    private final RequestAuth auth;
    private final ReplayWindow seen;
    private final Consumer<String> refused;
    private final Supplier<String> self;
    private final java.util.function.Predicate<java.net.InetAddress> unsignedFrom;

    private RequestGate(RequestAuth auth, ReplayWindow seen, Consumer<String> refused, Supplier<String> self,
            java.util.function.Predicate<java.net.InetAddress> unsignedFrom) {
        this.auth = auth;
        this.seen = seen;
        this.refused = refused;
        this.self = self;
        this.unsignedFrom = unsignedFrom;
    }

    /**
     * A gate for requests signed with {@code secret} (null: no checks) for the instance whose HTTP address, as it
     * registers, {@code self} gives ({@code host:port}; null until its port is bound), reporting each refusal's code
     * ({@link RequestAuth.RefusedException#code()}) to {@code refused}.
     */
    public static RequestGate of(NotifyAuth secret, Supplier<String> self, Consumer<String> refused) {
        return of(secret, self, refused, address -> false);
    }

    /**
     * As {@link #of(NotifyAuth, Supplier, Consumer)}, letting unsigned requests through from addresses that
     * {@code unsignedFrom} allows: vLLM's proxy, in front of a role started with {@code --vllm-proxy}, signs nothing.
     */
    public static RequestGate of(NotifyAuth secret, Supplier<String> self, Consumer<String> refused,
            java.util.function.Predicate<java.net.InetAddress> unsignedFrom) {
        java.util.Objects.requireNonNull(unsignedFrom, "unsignedFrom");
        if (secret == null) {
            return new RequestGate(null, null, refused, self, unsignedFrom);
        }
        return new RequestGate(RequestAuth.of(secret), new ReplayWindow(ReplayWindow.DEFAULT_CAPACITY,
                secret.maxAge().toMillis(), secret::nowMillis), refused, self, unsignedFrom);
    }

    /** Whether requests must be signed. */
    public boolean signed() {
        return auth != null;
    }

    /**
     * What the gate let through: the body as UTF-8 text, the transfer id it was signed for (null when the gate checks
     * nothing), and the client key it names (empty for none).
     */
    public record Passed(String body, String signedFor, String client) {
    }

    /**
     * Checks the request's signature from its headers, then reads its body as UTF-8 and hands it to {@code handler}
     * ({@link Passed}), or answers 401 ({@code "type": "authentication_error"}, the refusal's code) without calling it.
     * {@code trusted} runs once the headers' signature has passed, before the body is read (the caller's
     * connection bookkeeping); it does not run without a secret.
     */
    public Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response, Runnable trusted,
            Function<Passed, Publisher<Void>> handler) {
        String advice = "send a shorter prompt, or the prompt as a list of token ids";
        if (auth == null || !request.requestHeaders().contains(RequestAuth.SIGNATURE_HEADER)
                && request.remoteAddress() != null && request.remoteAddress().getAddress() != null
                && unsignedFrom.test(request.remoteAddress().getAddress())) {
            String client = clientKey(request.requestHeaders().get(RequestAuth.CLIENT_HEADER, ""));
            return HttpJson.withBody(request, response, HttpJson.MAX_BODY_BYTES, advice,
                    body -> handler.apply(new Passed(body, null, client)));
        }
        RequestAuth.Claim claim;
        String path = request.fullPath();
        String method = request.method().name();
        try {
            claim = auth.precheck(request.requestHeaders());
            String me = self.get();
            if (me == null) {
                throw new RequestAuth.RefusedException("instance_starting", "this instance is starting and does not"
                        + " know its own address yet; retry in a moment");
            }
            auth.verifyHead(claim, method, path, me);
            seen.accept(claim.ts(), claim.tag());
        } catch (RequestAuth.RefusedException e) {
            return refuse(response, e);
        }
        trusted.run();
        MessageDigest digest = RequestAuth.bodyDigest();
        return HttpJson.withBytes(request, response, BodyBudget.process(), HttpJson.MAX_BODY_BYTES, advice, digest,
                bytes -> {
                    try {
                        auth.verifyBody(claim, digest.digest());
                    } catch (RequestAuth.RefusedException e) {
                        return refuse(response, e);
                    }
                    return HttpJson.withText(response, bytes,
                            body -> handler.apply(new Passed(body, claim.transferId(), claim.client())));
                });
    }

    /** The client key as a role keeps it: at most {@value RequestAuth#MAX_NAME_CHARS} characters, else cut. */
    private static String clientKey(String named) {
        return named.length() <= RequestAuth.MAX_NAME_CHARS ? named : named.substring(0, RequestAuth.MAX_NAME_CHARS);
    }

    /**
     * Refuses a request whose body named another transfer than the one it was signed for.
     */
    public Publisher<Void> mismatched(HttpServerResponse response, String signedFor, String named) {
        return refuse(response, new RequestAuth.RefusedException("bad_signature", "the request was signed for"
                + " transfer " + signedFor + " but names transfer " + named + " in kv_transfer_params"));
    }

    private Mono<Void> refuse(HttpServerResponse response, RequestAuth.RefusedException e) {
        refused.accept(e.code());
        // the body is left unread (or was not what was signed): nothing more is taken from this connection
        BodyReader.lingerThenClose(response);
        if (e.code().equals("replay_window_full") || e.code().equals("instance_starting")) {
            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded", e.code(),
                    e.getMessage()));
        }
        return Mono.from(HttpJson.error(response, HttpResponseStatus.UNAUTHORIZED, "authentication_error", e.code(),
                e.getMessage()));
    }
}
