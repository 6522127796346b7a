package dev.kvflux.serving.api;

import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * What a role lets through to its handler: with a notify secret, only requests the proxy signed
 * ({@link RequestAuth}), each once ({@link ReplayWindow}); an unsigned, malformed or stale request is answered 401
 * before its body is read, a forged or replayed one after the body is read and before anything parses it. Without
 * a secret (a role bound to loopback) every request passes, unsigned.
 */
public final class RequestGate {
    private final RequestAuth auth;
    private final ReplayWindow seen;
    private final Consumer<String> refused;

    private RequestGate(RequestAuth auth, ReplayWindow seen, Consumer<String> refused) {
        this.auth = auth;
        this.seen = seen;
        this.refused = refused;
    }

    /**
     * A gate for requests signed with {@code secret} (null: no checks), reporting each refusal's code
     * ({@link RequestAuth.RefusedException#code()}) to {@code refused}.
     */
    public static RequestGate of(NotifyAuth secret, Consumer<String> refused) {
        if (secret == null) {
            return new RequestGate(null, null, refused);
        }
        return new RequestGate(RequestAuth.of(secret), new ReplayWindow(ReplayWindow.DEFAULT_CAPACITY,
                secret.maxAge().toMillis(), secret::nowMillis), refused);
    }

    /** Whether requests must be signed. */
    public boolean signed() {
        return auth != null;
    }

    /**
     * Reads the request's body as UTF-8 and hands it to {@code handler} with the transfer id it was signed for
     * (null when the gate checks nothing), or answers 401 ({@code "type": "authentication_error"}, the refusal's
     * code) without calling it.
     */
    public Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response,
            BiFunction<String, String, Publisher<Void>> handler) {
        if (auth == null) {
            return HttpJson.withBody(request, response, body -> handler.apply(body, null));
        }
        RequestAuth.Claim claim;
        try {
            claim = auth.precheck(request.requestHeaders());
        } catch (RequestAuth.RefusedException e) {
            return refuse(response, e);
        }
        String path = request.fullPath();
        String method = request.method().name();
        return HttpJson.withBytes(request, response, HttpJson.MAX_BODY_BYTES,
                "send a shorter prompt, or the prompt as a list of token ids", bytes -> {
                    try {
                        auth.verify(claim, method, path, bytes);
                        seen.accept(claim.ts(), claim.tag());
                    } catch (RequestAuth.RefusedException e) {
                        return refuse(response, e);
                    }
                    return HttpJson.withText(response, bytes, body -> handler.apply(body, claim.transferId()));
                });
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
        if (e.code().equals("replay_window_full")) {
            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded", e.code(),
                    e.getMessage()));
        }
        return Mono.from(HttpJson.error(response, HttpResponseStatus.UNAUTHORIZED, "authentication_error", e.code(),
                e.getMessage()));
    }
}
