package dev.kvflux.serving.api;

import dev.kvflux.serving.proxy.InstanceRegistry;

import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Objects;

/**
 * Signed registrations: an instance signs each {@code POST /register} with the cluster's notify secret and
 * the proxy accepts only registrations signed with it.
 *
 * <p>A signed registration carries two headers: {@value #TS_HEADER}, the signer's wall clock in milliseconds
 * since the epoch, and {@value #SIGNATURE_HEADER}, 64 lower-case hex digits of HMAC-SHA256 under the secret
 * over {@code "kvflux-register-v1"}, the time as 8 big-endian bytes and the body's bytes (the same primitive
 * as notify frames, under a domain of its own). It is accepted when the tag matches and the time is within
 * the secret's max age (30 s) of the proxy's clock; {@link InstanceRegistry} also refuses a registration no
 * newer than the last one it accepted for the same instance, so a replay can neither revive an instance
 * later nor keep one alive. Thread-safe.
 */
public final class RegistrationAuth {
    /** The header holding the signer's time, milliseconds since the epoch. */
    public static final String TS_HEADER = "x-kvflux-ts";
    /** The header holding the registration's tag, in hex. */
    public static final String SIGNATURE_HEADER = "x-kvflux-signature";

    private static final byte[] DOMAIN = "kvflux-register-v1".getBytes(StandardCharsets.US_ASCII);
    /** The domain of member records in etcd ({@link MemberRecord}): a registration's tag never passes for one. */
    private static final byte[] MEMBER_DOMAIN = "kvflux-member-v1".getBytes(StandardCharsets.US_ASCII);
    private static final HexFormat HEX = HexFormat.of();

    private final NotifyAuth secret;

    private RegistrationAuth(NotifyAuth secret) {
        this.secret = secret;
    }

    /** Registrations signed and checked with the notify channel's secret. */
    public static RegistrationAuth of(NotifyAuth secret) {
        return new RegistrationAuth(Objects.requireNonNull(secret, "secret"));
    }

    /** Adds the time and the tag of {@code body}, signed now, to {@code headers}. */
    public HttpHeaders sign(HttpHeaders headers, byte[] body) {
        long ts = secret.nowMillis();
        return headers.set(TS_HEADER, Long.toString(ts)).set(SIGNATURE_HEADER, HEX.formatHex(secret.tag(DOMAIN, ts, body)));
    }

    /**
     * The signing time of a registration whose headers are {@code headers} and body {@code body}.
     *
     * @throws RefusedException saying why, if a header is missing or malformed, the tag is wrong or the time
     *     is outside the max age
     */
    public long verify(HttpHeaders headers, byte[] body) {
        String tsText = headers.get(TS_HEADER);
        String signature = headers.get(SIGNATURE_HEADER);
        if (tsText == null || signature == null) {
            throw new RefusedException("the registration is not signed (no " + TS_HEADER + " and " + SIGNATURE_HEADER
                    + " headers) and this proxy has a notify secret; give the instance the same notify.secret (or "
                    + NotifyAuth.ENV + ")");
        }
        long ts;
        byte[] tag;
        try {
            ts = Long.parseLong(tsText.trim());
            tag = signature.length() == 64 ? HEX.parseHex(signature) : null;
        } catch (IllegalArgumentException e) {
            tag = null;
            ts = 0;
        }
        if (tag == null) {
            throw new RefusedException("the registration's " + TS_HEADER + " or " + SIGNATURE_HEADER
                    + " header is malformed: expected milliseconds since the epoch and 64 hex digits");
        }
        if (!NotifyAuth.tagsEqual(secret.tag(DOMAIN, ts, body), tag)) {
            throw new RefusedException("the registration's signature is wrong: the instance uses another notify"
                    + " secret, or the registration was altered");
        }
        if (!secret.fresh(ts)) {
            throw new RefusedException("the registration was signed " + (secret.nowMillis() - ts) + " ms from the"
                    + " proxy's clock, beyond the " + secret.maxAge().toMillis() + " ms allowed: a replay, or the"
                    + " hosts' clocks differ (synchronise them, e.g. with NTP)");
        }
        return ts;
    }

    /** A member record's signing time (milliseconds since the epoch) and tag (64 lower-case hex digits). */
    public record Signature(long signedAtMillis, String hex) {
    }

    /**
     * Signs a member record's bytes now: HMAC-SHA256 under the secret over {@code "kvflux-member-v1"}, the time as 8
     * big-endian bytes and the record's bytes, the registration's primitive under a domain of its own.
     */
    public Signature signRecord(byte[] record) {
        long ts = secret.nowMillis();
        return new Signature(ts, HEX.formatHex(secret.tag(MEMBER_DOMAIN, ts, record)));
    }

    /**
     * Checks a member record's tag (not its time: see {@link #checkFresh}).
     *
     * @throws RefusedException saying why, if the tag is malformed or wrong
     */
    public void verifyRecord(Signature signature, byte[] record) {
        byte[] tag;
        try {
            tag = signature.hex().length() == 64 ? HEX.parseHex(signature.hex()) : null;
        } catch (IllegalArgumentException e) {
            tag = null;
        }
        if (tag == null) {
            throw new RefusedException("the record's signature is malformed: expected 64 hex digits");
        }
        if (!NotifyAuth.tagsEqual(secret.tag(MEMBER_DOMAIN, signature.signedAtMillis(), record), tag)) {
            throw new RefusedException("the record's signature is wrong: its writer uses another notify secret, or the"
                    + " record was altered");
        }
    }

    /**
     * Checks that something signed at {@code signedAtMillis} was signed within the secret's max age (30 s) of this
     * clock, as a record just written must be.
     *
     * @throws RefusedException saying by how much it is not
     */
    public void checkFresh(long signedAtMillis) {
        if (!secret.fresh(signedAtMillis)) {
            throw new RefusedException("it was signed " + (secret.nowMillis() - signedAtMillis) + " ms from the proxy's"
                    + " clock, beyond the " + secret.maxAge().toMillis() + " ms allowed for a record just written: a"
                    + " replay, or the hosts' clocks differ (synchronise them, e.g. with NTP)");
        }
    }

    /** A registration refused by its signature; the message says why, for the instance's log. */
    public static final class RefusedException extends RuntimeException {
        public RefusedException(String message) {
            super(message, null, false, false);
        }
    }
}
