package dev.kvflux.pipeline.net;

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
 * <p>A signed frame is the message's msgpack map with two more keys: {@code ts}, the sender's wall clock
 * in milliseconds since the epoch when it signed, and {@code mac}, 32 bytes of HMAC-SHA256 under the secret
 * over {@code "kvflux-notify-v1"}, {@code ts} as 8 big-endian bytes, and the message's own msgpack bytes
 * (which hold its type and transfer id). A frame is accepted when its tag matches and its {@code ts} is
 * within {@link #DEFAULT_MAX_AGE} of the receiver's clock; a frame replayed later than that is rejected, and
 * one replayed sooner names a transfer that already finished, which decode ignores as a duplicate.
 * Time is read from the scheduler's clock ({@link Schedulers#parallel()} unless set). Thread-safe.
 */
public final class NotifyAuth {
    /** The environment variable that holds the secret; it takes precedence over {@code notify.secret}. */
    public static final String ENV = "KVFLUX_NOTIFY_SECRET";
    /** The shortest secret accepted. */
    public static final int MIN_SECRET_CHARS = 16;
    /** How far a frame's {@code ts} may be from the receiver's clock, either way. */
    public static final Duration DEFAULT_MAX_AGE = Duration.ofSeconds(30);

    private static final String ALGORITHM = "HmacSHA256";
    private static final byte[] DOMAIN = "kvflux-notify-v1".getBytes(StandardCharsets.US_ASCII);

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

    /** The frame payload for {@code message}, signed now. */
    byte[] sign(NotifyMessage message) {
        long ts = now();
        return NotifyCodec.encode(message, ts, tag(ts, NotifyCodec.encode(message)));
    }

    /**
     * The message in a signed frame payload.
     *
     * @throws MalformedFrameException if the payload is not a message
     * @throws UnauthenticatedFrameException saying why, if the tag is missing or wrong or the frame too old
     */
    NotifyMessage verify(byte[] payload) {
        NotifyCodec.Signed signed = NotifyCodec.decodeSigned(payload);
        NotifyMessage message = signed.message();
        if (signed.mac() == null || signed.ts() == null) {
            throw new UnauthenticatedFrameException(message.type() + " for transfer " + message.transferId()
                    + " carries no 'mac' and 'ts': its sender has no notify secret. Give prefill and decode the same"
                    + " notify.secret (or " + ENV + ")");
        }
        byte[] expected = tag(signed.ts(), NotifyCodec.encode(message));
        if (!MessageDigest.isEqual(expected, signed.mac())) {
            throw new UnauthenticatedFrameException(message.type() + " for transfer " + message.transferId()
                    + " has a wrong 'mac': its sender uses another notify secret, or the frame was altered");
        }
        long age = now() - signed.ts();
        if (Math.abs(age) > maxAge.toMillis()) {
            throw new UnauthenticatedFrameException(message.type() + " for transfer " + message.transferId()
                    + " was signed " + age + " ms from this host's clock, beyond the " + maxAge.toMillis()
                    + " ms allowed: a replayed frame, or the hosts' clocks differ (synchronise them, e.g. with NTP)");
        }
        return message;
    }

    private byte[] tag(long ts, byte[] message) {
        return tag(DOMAIN, ts, message);
    }

    /**
     * HMAC-SHA256 under this secret over {@code domain}, {@code ts} as 8 big-endian bytes and {@code body}:
     * the primitive under notify frames (domain {@code kvflux-notify-v1}), for other messages the cluster
     * signs with the same secret under a domain of their own, so that one kind can never pass for another.
     */
    public byte[] tag(byte[] domain, long ts, byte[] body) {
        Objects.requireNonNull(domain, "domain");
        Objects.requireNonNull(body, "body");
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(key);
            mac.update(domain);
            mac.update(ByteBuffer.allocate(Long.BYTES).putLong(0, ts));
            return mac.doFinal(body);
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
