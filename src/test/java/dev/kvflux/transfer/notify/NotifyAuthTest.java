package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Signing and checking notify frames with a shared secret, on a virtual clock. */
class NotifyAuthTest {
    private static final String SECRET = "0123456789abcdef0123456789abcdef";

    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final NotifyAuth auth = NotifyAuth.of(SECRET).clock(clock);

    @Test
    void everySignedMessageVerifies() {
        clock.advanceTimeBy(Duration.ofDays(20_000));
        for (NotifyMessage message : List.of(new NotifyMessage.WriteDone("t-1"),
                new NotifyMessage.WriteFailed("t-2", StatusCode.ERR_GPU_OP, "copy failed"),
                new NotifyMessage.RemoteBlocks("r-3", "t-3", List.of(4L, 5L), 0), new NotifyMessage.Release("t-4"))) {
            assertThat(auth.verify(auth.sign(message))).isEqualTo(message);
        }
    }

    @Test
    void signedFrameIsMalformedToAReceiverWithoutASecretNamingTheCause() {
        assertThatThrownBy(() -> NotifyCodec.decode(auth.sign(new NotifyMessage.WriteDone("t-1"))))
                .isInstanceOf(MalformedFrameException.class).hasMessageContaining("notify secret");
    }

    @Test
    void unsignedFrameIsRejectedNamingTheMissingSecret() {
        assertThatThrownBy(() -> auth.verify(NotifyCodec.encode(new NotifyMessage.WriteDone("t-1"))))
                .isInstanceOf(UnauthenticatedFrameException.class)
                .hasMessageContaining("no notify secret").hasMessageContaining("the same notify secret");
        assertThatThrownBy(() -> auth.verify(NotifyCodec.encode(new NotifyMessage.WriteDone("t-1-" + "x".repeat(64)))))
                .isInstanceOf(UnauthenticatedFrameException.class)
                .hasMessageContaining("no notify secret");
    }

    @Test
    void frameSignedWithAnotherSecretIsRejected() {
        byte[] frame = NotifyAuth.of("fedcba9876543210fedcba9876543210").clock(clock)
                .sign(new NotifyMessage.WriteDone("t-1"));

        assertThatThrownBy(() -> auth.verify(frame))
                .isInstanceOf(UnauthenticatedFrameException.class).hasMessageContaining("wrong tag");
    }

    @Test
    void tagOfOneTransferDoesNotAuthenticateAnother() {
        byte[] signed = auth.sign(new NotifyMessage.WriteDone("t-1"));
        byte[] forged = auth.sign(new NotifyMessage.WriteDone("t-2"));
        // t-2's message with t-1's timestamp and tag
        System.arraycopy(signed, signed.length - NotifyAuth.ENVELOPE_BYTES, forged,
                forged.length - NotifyAuth.ENVELOPE_BYTES, NotifyAuth.ENVELOPE_BYTES);

        assertThatThrownBy(() -> auth.verify(forged))
                .isInstanceOf(UnauthenticatedFrameException.class).hasMessageContaining("wrong tag");
    }

    @Test
    void frameIsAcceptedUpToTheMaxAgeAndRejectedAfter() {
        byte[] frame = auth.sign(new NotifyMessage.WriteDone("t-1"));

        clock.advanceTimeBy(NotifyAuth.DEFAULT_MAX_AGE);
        assertThat(auth.verify(frame)).isEqualTo(new NotifyMessage.WriteDone("t-1"));

        clock.advanceTimeBy(Duration.ofMillis(1));
        assertThatThrownBy(() -> auth.verify(frame))
                .isInstanceOf(UnauthenticatedFrameException.class).hasMessageContaining("replayed");
    }

    @Test
    void shortSecretIsRefusedWithAdvice() {
        assertThatThrownBy(() -> NotifyAuth.of("short"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 16");
    }
}
