package dev.kvflux.transfer.notify;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Authenticated notifications: a secret shared by prefill and decode, with which the sender signs each
 * notify frame and the receiver checks it.
 *
 * <p>A signed frame payload is a fixed envelope around the message's own msgpack bytes {@code M}:
 * {@code M}, then {@code ts} as 8 big-endian bytes (the sender's wall clock in milliseconds since the epoch
 * when it signed), then 32 bytes of HMAC-SHA256 under the secret over {@code "kvflux-notify-v2"}, {@code ts}
 * and {@code M}. The receiver checks the tag over these raw bytes before it decodes anything, so a peer
 * without the secret reaches no msgpack parsing at all. A frame is accepted when its tag matches and its
 * {@code ts} is within {@link #DEFAULT_MAX_AGE} of the receiver's clock; a frame replayed later than that is
 * rejected, and one replayed sooner names a transfer that already finished, which decode ignores as a
 * duplicate.
 * Time is read from the scheduler's clock ({@link Schedulers#parallel()} unless set). Thread-safe.
 */
public final class NotifyAuth {
    /** The environment variable kvflux's command line reads the secret from (before its {@code notify.secret} key). */
    public static final String ENV = "KVFLUX_NOTIFY_SECRET";
    /** The shortest secret accepted. */
    public static final int MIN_SECRET_CHARS = 16;
    /** How far a frame's {@code ts} may be from the receiver's clock, either way. */
    public static final Duration DEFAULT_MAX_AGE = Duration.ofSeconds(30);

    private static final String ALGORITHM = "HmacSHA256";
    private static final byte[] DOMAIN = "kvflux-notify-v2".getBytes(StandardCharsets.US_ASCII);

    private final SecretKeySpec key;
    private final Duration maxAge;
    private final Scheduler clock;

    private NotifyAuth(SecretKeySpec key, Duration maxAge, Scheduler clock) {
        this.key = key;
        this.maxAge = maxAge;
        this.clock = clock;
    }

    /**
     * Signing and checking with {@code secret}.
     *
     * @throws IllegalArgumentException if the secret is shorter than {@value #MIN_SECRET_CHARS} characters
     */
    public static NotifyAuth of(String secret) {
        Objects.requireNonNull(secret, "secret");
        if (secret.length() < MIN_SECRET_CHARS) {
            throw new IllegalArgumentException("the notify secret is " + secret.length() + " characters; use at least "
                    + MIN_SECRET_CHARS + ", for example the output of `openssl rand -hex 32`");
        }
        return new NotifyAuth(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), ALGORITHM), DEFAULT_MAX_AGE,
                null);
    }

    /** This secret with frames accepted up to {@code maxAge} from the receiver's clock. */
    public NotifyAuth maxAge(Duration maxAge) {
        Objects.requireNonNull(maxAge, "maxAge");
        if (maxAge.isZero() || maxAge.isNegative()) {
            throw new IllegalArgumentException("the notify frame max age must be positive, got " + maxAge);
        }
        return new NotifyAuth(key, maxAge, clock);
    }

    /** This secret reading time from {@code clock}. */
    public NotifyAuth clock(Scheduler clock) {
        return new NotifyAuth(key, maxAge, Objects.requireNonNull(clock, "clock"));
    }

    /** Bytes a signed payload adds after the message: {@code ts} and the tag. */
    static final int ENVELOPE_BYTES = Long.BYTES + 32;

    /** The frame payload for {@code message}, signed now. */
    byte[] sign(NotifyMessage message) {
        long ts = now();
        byte[] body = NotifyCodec.encode(message);
        byte[] tag = tag(ts, body, body.length);
        return ByteBuffer.allocate(body.length + ENVELOPE_BYTES).put(body).putLong(ts).put(tag).array();
    }

    /**
     * The message in a signed frame payload; the tag and the age are checked on the raw bytes first.
     *
     * @throws UnauthenticatedFrameException saying why, if the payload is too short to be signed, the tag is
     *     wrong or the frame too old
     * @throws MalformedFrameException if the authenticated payload is not a message
     */
    NotifyMessage verify(byte[] payload) {
        return verify(ByteBuffer.wrap(payload), null);
    }

    /**
     * As {@link #verify(byte[])}, for the payload from {@code payload}'s position to its limit, read in place,
     * accepting only messages of the {@code accepted} types (all when null).
     */
    NotifyMessage verify(ByteBuffer payload, java.util.Set<NotifyMessage.Type> accepted) {
        int start = payload.position();
        int body = payload.remaining() - ENVELOPE_BYTES;
        if (body <= 0) {
            throw new UnauthenticatedFrameException("a notify frame of " + payload.remaining() + " bytes is too short"
                    + " to carry a tag: its sender has no notify secret. Give prefill and decode the same notify secret");
        }
        long ts = payload.getLong(start + body);
        byte[] expected = tag(DOMAIN, ts, payload.duplicate().limit(start + body));
        byte[] actual = new byte[expected.length];
        payload.get(start + body + Long.BYTES, actual);
        if (!MessageDigest.isEqual(expected, actual)) {
            throw new UnauthenticatedFrameException("a notify frame has a wrong tag: its sender has no notify secret"
                    + " or another one, or the frame was altered. Give prefill and decode the same notify secret");
        }
        long age = now() - ts;
        if (Math.abs(age) > maxAge.toMillis()) {
            throw new UnauthenticatedFrameException("a notify frame was signed " + age + " ms from this host's clock,"
                    + " beyond the " + maxAge.toMillis() + " ms allowed: a replayed frame, or the hosts' clocks differ"
                    + " (synchronise them, e.g. with NTP)");
        }
        return NotifyCodec.decode(payload, start, body, accepted);
    }

    private byte[] tag(long ts, byte[] message, int length) {
        return tag(DOMAIN, ts, ByteBuffer.wrap(message, 0, length));
    }

    /**
     * HMAC-SHA256 under this secret over {@code domain}, {@code ts} as 8 big-endian bytes and {@code body}:
     * the primitive under notify frames (domain {@code kvflux-notify-v2}), for other messages the cluster
     * signs with the same secret under a domain of their own, so that one kind can never pass for another.
     */
    public byte[] tag(byte[] domain, long ts, byte[] body) {
        Objects.requireNonNull(body, "body");
        return tag(domain, ts, ByteBuffer.wrap(body));
    }

    /** The tag over {@code body}'s bytes from its position to its limit; the buffer itself is not moved. */
    private byte[] tag(byte[] domain, long ts, ByteBuffer body) {
        Objects.requireNonNull(domain, "domain");
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(key);
            mac.update(domain);
            mac.update(ByteBuffer.allocate(Long.BYTES).putLong(0, ts));
            mac.update(body.duplicate());
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(ALGORITHM + " is not available in this JDK", e);
        }
    }

    /** Whether {@code expected} and {@code actual} tags are equal, compared in constant time. */
    public static boolean tagsEqual(byte[] expected, byte[] actual) {
        return actual != null && MessageDigest.isEqual(expected, actual);
    }

    /** Whether {@code ts} (milliseconds since the epoch) is within the max age of this secret's clock, either way. */
    public boolean fresh(long ts) {
        return Math.abs(now() - ts) <= maxAge.toMillis();
    }

    /** How far a signed message's time may be from this secret's clock, either way. */
    public Duration maxAge() {
        return maxAge;
    }

    /** The time now on this secret's clock, in milliseconds since the epoch: what a signer puts in its {@code ts}. */
    public long nowMillis() {
        return now();
    }

    private long now() {
        return (clock != null ? clock : Schedulers.parallel()).now(TimeUnit.MILLISECONDS);
    }
}
