package dev.kvflux.tools.bench;

import dev.kvflux.serving.api.RequestAuth;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.Map;

/**
 * How {@code kvflux hostile}'s attacks sign a request to a role as the proxy does ({@link RequestAuth}): the one place
 * that calls the signing API, so that a change of what the signature covers is made here alone. Every caller
 * already names the destination, the role's HTTP address as it registered it ({@code host:port}), and the client the
 * request is for (its key as the proxy names it, or null for none), both of which the signature covers.
 */
final class AttackSigning {
    /** The secret the attacks that are not the cluster sign with: well formed, and not the cluster's. */
    static final String WRONG_SECRET = "another-secret-that-is-not-the-cluster-s";

    private AttackSigning() {
    }

    /** A signer with {@code secret}. */
    static RequestAuth signer(NotifyAuth secret) {
        return RequestAuth.of(secret);
    }

    /** A signer with {@link #WRONG_SECRET}: its signatures are well formed, fresh and wrong. */
    static RequestAuth wrongSigner() {
        return signer(NotifyAuth.of(WRONG_SECRET));
    }

    /**
     * The headers that sign {@code POST path} with {@code body} for {@code transferId}, sent to {@code destination}
     * ({@code host:port}) for {@code client}, signed now by {@code signer}.
     */
    static HttpHeaders sign(RequestAuth signer, String path, String transferId, String destination, String client,
            byte[] body) {
        return signer.sign(new DefaultHttpHeaders(), "POST", path, transferId, destination, client == null ? ""
                : client, body);
    }

    /** {@link #sign}'s headers as raw header lines, each ending in CRLF. */
    static String headerLines(RequestAuth signer, String path, String transferId, String destination, String client,
            byte[] body) {
        StringBuilder lines = new StringBuilder();
        for (Map.Entry<String, String> header : sign(signer, path, transferId, destination, client, body)) {
            lines.append(header.getKey()).append(": ").append(header.getValue()).append("\r\n");
        }
        return lines.toString();
    }
}
