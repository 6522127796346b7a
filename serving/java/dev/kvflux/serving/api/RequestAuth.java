package dev.kvflux.serving.api;

import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Objects;

/**
 * Signed requests from the proxy to a role: the proxy signs each completion it sends to prefill or decode with the
 * cluster's notify secret, and a role with a secret serves only requests signed with it, so nobody who can merely
 * reach a role's HTTP port can make it queue, allocate, or connect anywhere.
 *
 * <p>A signed request carries three headers: {@value #TRANSFER_HEADER} (the transfer id the proxy gave it),
 * {@value #TS_HEADER} (the signer's wall clock, milliseconds since the epoch) and {@value #SIGNATURE_HEADER} (64
 * lower-case hex digits of HMAC-SHA256 under the secret over {@code "kvflux-request-v1"}, the time, and the text
 * {@code METHOD \n PATH \n TRANSFER_ID \n} followed by the SHA-256 of the body). A role checks the headers' presence,
 * form and time before it reads the body ({@link #precheck}), then the tag over the body it read ({@link #verify}),
 * then that the signature was not seen before within the window ({@link ReplayWindow}); it parses nothing before
 * all three pass. Thread-safe.
 */
public final class RequestAuth {
    /** The header holding the transfer id the request was signed for. */
    public static final String TRANSFER_HEADER = "x-kvflux-transfer-id";
    /** The header holding the signer's time, milliseconds since the epoch. */
    public static final String TS_HEADER = RegistrationAuth.TS_HEADER;
    /** The header holding the request's tag, in hex. */
    public static final String SIGNATURE_HEADER = RegistrationAuth.SIGNATURE_HEADER;
    /** The longest transfer id a signed request may name. */
    static final int MAX_TRANSFER_ID_CHARS = 256;

    private static final byte[] DOMAIN = "kvflux-request-v1".getBytes(StandardCharsets.US_ASCII);
    private static final HexFormat HEX = HexFormat.of();

    private final NotifyAuth secret;

    private RequestAuth(NotifyAuth secret) {
        this.secret = secret;
    }

    /** Requests signed and checked with the cluster's notify secret. */
    public static RequestAuth of(NotifyAuth secret) {
        return new RequestAuth(Objects.requireNonNull(secret, "secret"));
    }

    /** How long a signature stays valid either side of the verifier's clock. */
    public java.time.Duration maxAge() {
        return secret.maxAge();
    }

    /** Adds the transfer id, the time and the tag of {@code method path} with {@code body}, signed now. */
    public HttpHeaders sign(HttpHeaders headers, String method, String path, String transferId, byte[] body) {
        long ts = secret.nowMillis();
        return headers.set(TRANSFER_HEADER, transferId).set(TS_HEADER, Long.toString(ts))
                .set(SIGNATURE_HEADER, HEX.formatHex(tag(ts, method, path, transferId, body)));
    }

    /**
     * What the headers of a request claim, checked for presence, form and time only: enough to refuse an
     * unsigned, malformed or stale request before its body is read.
     *
     * @throws RefusedException saying why
     */
    public Claim precheck(HttpHeaders headers) {
        String transferId = headers.get(TRANSFER_HEADER);
        String tsText = headers.get(TS_HEADER);
        String signature = headers.get(SIGNATURE_HEADER);
        if (transferId == null || tsText == null || signature == null) {
            throw new RefusedException("unsigned_request", "the request is not signed (no " + TRANSFER_HEADER + ", "
                    + TS_HEADER + " and " + SIGNATURE_HEADER + " headers) and this instance has a notify secret: only"
                    + " the proxy, with the same secret, may send it requests");
        }
        long ts;
        byte[] tag;
        try {
            ts = Long.parseLong(tsText.trim());
            tag = signature.length() == 64 ? HEX.parseHex(signature) : null;
        } catch (IllegalArgumentException e) {
            ts = 0;
            tag = null;
        }
        if (tag == null || transferId.isEmpty() || transferId.length() > MAX_TRANSFER_ID_CHARS) {
            throw new RefusedException("malformed_signature", "the request's " + TRANSFER_HEADER + ", " + TS_HEADER
                    + " or " + SIGNATURE_HEADER + " header is malformed: expected a transfer id of 1 to "
                    + MAX_TRANSFER_ID_CHARS + " characters, milliseconds since the epoch and 64 hex digits");
        }
        if (!secret.fresh(ts)) {
            throw new RefusedException("stale_request", "the request was signed " + (secret.nowMillis() - ts)
                    + " ms from this instance's clock, beyond the " + secret.maxAge().toMillis() + " ms allowed: a"
                    + " replay, or the hosts' clocks differ (synchronise them, e.g. with NTP)");
        }
        return new Claim(transferId, ts, tag);
    }

    /**
     * Checks {@code claim}'s tag over {@code method path} and the body that was read.
     *
     * @throws RefusedException if the tag does not match (another secret, or an altered request)
     */
    public void verify(Claim claim, String method, String path, byte[] body) {
        if (!NotifyAuth.tagsEqual(tag(claim.ts(), method, path, claim.transferId(), body), claim.tag())) {
            throw new RefusedException("bad_signature", "the request's signature is wrong: it was signed with another"
                    + " notify secret, or altered on the way");
        }
    }

    private byte[] tag(long ts, String method, String path, String transferId, byte[] body) {
        byte[] head = (method + "\n" + path + "\n" + transferId + "\n").getBytes(StandardCharsets.UTF_8);
        byte[] digest = sha256(body);
        byte[] signed = new byte[head.length + digest.length];
        System.arraycopy(head, 0, signed, 0, head.length);
        System.arraycopy(digest, 0, signed, head.length, digest.length);
        return secret.tag(DOMAIN, ts, signed);
    }

    private static byte[] sha256(byte[] body) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(body);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JVM has no SHA-256", e);
        }
    }

    /**
     * What a request's headers claim: the transfer id it was signed for, the signing time and the tag.
     *
     * @param transferId the transfer id the request was signed for
     * @param ts when it was signed, milliseconds since the epoch
     * @param tag the HMAC it carries
     */
    public record Claim(String transferId, long ts, byte[] tag) {
    }

    /** A request refused by its signature: {@link #code()} for the answer, the message for the log and the caller. */
    public static final class RefusedException extends RuntimeException {
        private final String code;

        public RefusedException(String code, String message) {
            super(message, null, false, false);
            this.code = code;
        }

        /** The answer's error code: unsigned_request, malformed_signature, stale_request, bad_signature, replayed_request. */
        public String code() {
            return code;
        }
    }
}
