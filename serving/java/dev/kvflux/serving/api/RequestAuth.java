package dev.kvflux.serving.api;

import dev.kvflux.transfer.notify.LogText;
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
 * <p>A signed request carries {@value #TRANSFER_HEADER} (the transfer id the proxy gave it), {@value #TS_HEADER} (the
 * signer's wall clock, milliseconds since the epoch), {@value #DESTINATION_HEADER} (the instance it is for: its HTTP
 * address as it registered, {@code host:port}), {@value #CLIENT_HEADER} (the key of the client the proxy serves it
 * for, possibly empty), {@value #BODY_DIGEST_HEADER} (64 lower-case hex digits of the body's SHA-256) and
 * {@value #SIGNATURE_HEADER} (64 lower-case hex digits of HMAC-SHA256 under the secret over
 * {@code "kvflux-request-v2"}, the time, and the text {@code METHOD \n PATH \n TRANSFER_ID \n DESTINATION \n CLIENT
 * \n} followed by the body's SHA-256). Everything the tag covers is in the headers, so a role checks the signature
 * before it reads a byte of the body ({@link #precheck}, then {@link #verifyHead} with its own address as the
 * destination: a request signed for another instance is refused there), then that the signature was not seen before
 * within the window ({@link ReplayWindow}), and only then reads the body, through the digest, which must be the one
 * declared ({@link #verifyBody}). It parses nothing before all of these pass. Thread-safe.
 */
public final class RequestAuth {
    /** The header holding the transfer id the request was signed for. */
    public static final String TRANSFER_HEADER = "x-kvflux-transfer-id";
    /** The header holding the signer's time, milliseconds since the epoch. */
    public static final String TS_HEADER = RegistrationAuth.TS_HEADER;
    /** The header holding the request's tag, in hex. */
    public static final String SIGNATURE_HEADER = RegistrationAuth.SIGNATURE_HEADER;
    /** The header naming the instance the request was signed for: its HTTP address as registered, host:port. */
    public static final String DESTINATION_HEADER = "x-kvflux-destination";
    /** The header holding the key of the client the request is for ({@code ClientKeys}); may be empty. */
    public static final String CLIENT_HEADER = "x-kvflux-client";
    /** The header holding the body's SHA-256, in hex. */
    public static final String BODY_DIGEST_HEADER = "x-kvflux-body-sha256";
    /** The longest destination or client key a signed request may name. */
    static final int MAX_NAME_CHARS = 256;
    /** The longest transfer id a signed request may name. */
    static final int MAX_TRANSFER_ID_CHARS = 256;

    private static final byte[] DOMAIN = "kvflux-request-v2".getBytes(StandardCharsets.US_ASCII);
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

    /**
     * Adds the transfer id, the destination, the client key, the body's digest, the time and the tag of
     * {@code method path} with {@code body}, signed now for the instance at {@code destination} ({@code host:port}, as
     * it registered) on behalf of {@code client} (empty when there is none).
     */
    public HttpHeaders sign(HttpHeaders headers, String method, String path, String transferId, String destination,
            String client, byte[] body) {
        long ts = secret.nowMillis();
        byte[] digest = sha256(body);
        return headers.set(TRANSFER_HEADER, transferId).set(TS_HEADER, Long.toString(ts))
                .set(DESTINATION_HEADER, destination).set(CLIENT_HEADER, client)
                .set(BODY_DIGEST_HEADER, HEX.formatHex(digest))
                .set(SIGNATURE_HEADER, HEX.formatHex(tag(ts, method, path, transferId, destination, client, digest)));
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
        String destination = headers.get(DESTINATION_HEADER, "");
        String client = headers.get(CLIENT_HEADER, "");
        long ts;
        byte[] tag;
        byte[] digest;
        try {
            ts = Long.parseLong(tsText.trim());
            tag = signature.length() == 64 ? HEX.parseHex(signature) : null;
            String declared = headers.get(BODY_DIGEST_HEADER, "");
            digest = declared.length() == 64 ? HEX.parseHex(declared) : null;
        } catch (IllegalArgumentException e) {
            ts = 0;
            tag = null;
            digest = null;
        }
        if (tag == null || digest == null || transferId.isEmpty() || transferId.length() > MAX_TRANSFER_ID_CHARS
                || destination.isEmpty() || destination.length() > MAX_NAME_CHARS
                || client.length() > MAX_NAME_CHARS) {
            throw new RefusedException("malformed_signature", "the request's signature headers are malformed: expected"
                    + " " + TRANSFER_HEADER + " of 1 to " + MAX_TRANSFER_ID_CHARS + " characters, " + TS_HEADER
                    + " in milliseconds since the epoch, " + DESTINATION_HEADER + " and " + CLIENT_HEADER + " of at most "
                    + MAX_NAME_CHARS + " characters, and " + BODY_DIGEST_HEADER + " and " + SIGNATURE_HEADER + " of 64"
                    + " hex digits each (the proxy and the instance must run the same kvflux version)");
        }
        if (!secret.fresh(ts)) {
            throw new RefusedException("stale_request", "the request was signed " + (secret.nowMillis() - ts)
                    + " ms from this instance's clock, beyond the " + secret.maxAge().toMillis() + " ms allowed: a"
                    + " replay, or the hosts' clocks differ (synchronise them, e.g. with NTP)");
        }
        return new Claim(transferId, ts, tag, destination, client, digest);
    }

    /**
     * Checks {@code claim}'s tag over {@code method path}, as signed for {@code self} (this instance's HTTP address as it
     * registered), and the body digest it declares: the body itself is checked against that digest by
     * {@link #verifyBody} once it is read.
     *
     * @throws RefusedException {@code wrong_destination} if it was signed for another instance, {@code bad_signature}
     *     if the tag does not match (another secret, or altered headers)
     */
    public void verifyHead(Claim claim, String method, String path, String self) {
        if (!claim.destination().equals(self)) {
            throw new RefusedException("wrong_destination", "the request was signed for instance "
                    + LogText.escape(claim.destination()) + ", not this one (" + self + "): a request meant for"
                    + " another instance, sent here");
        }
        if (!NotifyAuth.tagsEqual(tag(claim.ts(), method, path, claim.transferId(), self, claim.client(),
                claim.digest()), claim.tag())) {
            throw new RefusedException("bad_signature", "the request's signature is wrong: it was signed with another"
                    + " notify secret, or altered on the way");
        }
    }

    /**
     * Checks that the body read has the digest the verified head declared.
     *
     * @throws RefusedException {@code bad_signature} if it has another (the body was altered on the way)
     */
    public void verifyBody(Claim claim, byte[] bodyDigest) {
        if (!NotifyAuth.tagsEqual(claim.digest(), bodyDigest)) {
            throw new RefusedException("bad_signature", "the request's body is not the one it was signed with: altered"
                    + " on the way");
        }
    }

    /** A SHA-256 for a body to be checked with {@link #verifyBody}, fed as the body arrives. */
    public static MessageDigest bodyDigest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JVM has no SHA-256", e);
        }
    }

    private byte[] tag(long ts, String method, String path, String transferId, String destination, String client,
            byte[] digest) {
        byte[] head = (method + "\n" + path + "\n" + transferId + "\n" + destination + "\n" + client + "\n")
                .getBytes(StandardCharsets.UTF_8);
        byte[] signed = new byte[head.length + digest.length];
        System.arraycopy(head, 0, signed, 0, head.length);
        System.arraycopy(digest, 0, signed, head.length, digest.length);
        return secret.tag(DOMAIN, ts, signed);
    }

    private static byte[] sha256(byte[] body) {
        return bodyDigest().digest(body);
    }

    /**
     * What a request's headers claim: the transfer id it was signed for, the signing time and the tag.
     *
     * @param transferId the transfer id the request was signed for
     * @param ts when it was signed, milliseconds since the epoch
     * @param tag the HMAC it carries
     * @param destination the instance it names as its destination (checked by {@link #verifyHead})
     * @param client the client key it names; empty for none
     * @param digest the body's SHA-256 it declares
     */
    public record Claim(String transferId, long ts, byte[] tag, String destination, String client, byte[] digest) {
    }

    /** A request refused by its signature: {@link #code()} for the answer, the message for the log and the caller. */
    public static final class RefusedException extends RuntimeException {
        private final String code;

        public RefusedException(String code, String message) {
            super(message, null, false, false);
            this.code = code;
        }

        /** The answer's error code: unsigned_request, malformed_signature, stale_request, wrong_destination, bad_signature, replayed_request, replay_window_full. */
        public String code() {
            return code;
        }
    }
}
