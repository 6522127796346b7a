package dev.kvflux.serving.proxy;

import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Objects;

/**
 * Who a request is for, as the roles share their KV blocks and prefill time between clients: the client's API key
 * ({@code Authorization: Bearer KEY}, or {@code api-key: KEY}) when it sends one, else its address; or, behind a
 * gateway that names the client in a header of its own, that header's value. The key the roles see never holds the
 * API key itself: it is {@code key:} and the first 16 hex digits of the key's SHA-256, {@code addr:} and the client's
 * IP address, or {@code hdr:} and the header's first value (at most 64 characters). Immutable.
 *
 * @param header the header that names the client, lower case; null to take the API key, else the address
 */
public record ClientKeys(String header) {
    /** API key, else address. */
    public static final ClientKeys DEFAULT = new ClientKeys(null);
    /** The longest header value kept as a key. */
    static final int MAX_HEADER_CHARS = 64;
    private static final HexFormat HEX = HexFormat.of();

    public ClientKeys {
        if (header != null) {
            if (header.isBlank() || !header.chars().allMatch(c -> c > 32 && c < 127 && c != ':')) {
                throw new IllegalArgumentException("the client header must be an HTTP header name, e.g."
                        + " X-Forwarded-For, got '" + header + "'");
            }
            header = header.toLowerCase(Locale.ROOT);
        }
    }

    /** The clients as named by {@code header} ({@code X-Forwarded-For}, say); requests without it go by address. */
    public static ClientKeys fromHeader(String header) {
        return new ClientKeys(Objects.requireNonNull(header, "header"));
    }

    /** The key of the request with {@code headers} from {@code remote}. */
    public String of(HttpHeaders headers, SocketAddress remote) {
        if (header != null) {
            String named = headers.get(header);
            if (named != null) {
                String first = named.split(",", 2)[0].strip();
                if (!first.isEmpty()) {
                    return "hdr:" + (first.length() <= MAX_HEADER_CHARS ? first : first.substring(0, MAX_HEADER_CHARS));
                }
            }
            return address(remote);
        }
        String key = apiKey(headers);
        return key != null ? "key:" + digest(key) : address(remote);
    }

    /** The class of a key, for meters: {@code api_key}, {@code address} or {@code header}. */
    public static String classOf(String key) {
        if (key.startsWith("key:")) {
            return "api_key";
        }
        return key.startsWith("hdr:") ? "header" : "address";
    }

    private static String apiKey(HttpHeaders headers) {
        String authorization = headers.get(HttpHeaderNames.AUTHORIZATION);
        if (authorization != null && authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            String token = authorization.substring(7).strip();
            if (!token.isEmpty()) {
                return token;
            }
        }
        String apiKey = headers.get("api-key");
        return apiKey != null && !apiKey.isBlank() ? apiKey.strip() : null;
    }

    private static String address(SocketAddress remote) {
        if (remote instanceof InetSocketAddress inet && inet.getAddress() != null) {
            return "addr:" + inet.getAddress().getHostAddress();
        }
        return "addr:unknown";
    }

    private static String digest(String key) {
        try {
            byte[] sha = MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
            return HEX.formatHex(sha, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JVM has no SHA-256", e);
        }
    }
}
