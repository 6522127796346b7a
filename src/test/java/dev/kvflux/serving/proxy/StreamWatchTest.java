package dev.kvflux.serving.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** In virtual time: which silent decodes the watch ejects at once, and which it asks a canary about. */
class StreamWatchTest {
    private static final Instance STUCK = new Instance(Role.DECODE, Instance.address("127.0.0.1:8200"),
            Instance.address("127.0.0.1:8201"));
    private static final Instance GOOD = new Instance(Role.DECODE, Instance.address("127.0.0.1:8300"),
            Instance.address("127.0.0.1:8301"));
    private final VirtualTimeScheduler clock = VirtualTimeScheduler.create();
    private final InstanceHealth health = new InstanceHealth(2, 3, Duration.ofSeconds(30),
            () -> clock.now(java.util.concurrent.TimeUnit.NANOSECONDS));
    private final List<Instance> suspects = new CopyOnWriteArrayList<>();
    private final StreamWatch watch = new StreamWatch(health, Duration.ofSeconds(4), clock, suspects::add);

    @AfterEach
    void stop() {
        watch.dispose();
        clock.dispose();
    }

    @Test
    void aSilentDecodeIsEjectedAtOnceWhenAnotherDecodesShortStreamsMovedThoughNoneIsOpen() {
        StreamWatch.Stream stuck = watch.start(STUCK);
        for (int i = 0; i < 8; i++) {
            // the good decode's answers each take half a second, and none is open when the watch looks
            StreamWatch.Stream quick = watch.start(GOOD);
            clock.advanceTimeBy(Duration.ofMillis(400));
            quick.progressed();
            quick.ended();
            clock.advanceTimeBy(Duration.ofMillis(100));
        }

        assertThat(health.usable(STUCK)).isFalse();
        assertThat(stuck.abortReason()).contains("stalled").contains("while other decodes' streams moved");
        assertThat(health.usable(GOOD)).isTrue();
    }

    @Test
    void aSilentDecodeWithNobodyMovingSinceIsOnlySuspect() {
        StreamWatch.Stream quick = watch.start(GOOD);
        quick.ended();
        watch.start(STUCK);
        clock.advanceTimeBy(Duration.ofSeconds(6));

        assertThat(health.usable(STUCK)).isTrue();
        assertThat(suspects).contains(STUCK);
    }

    @Test
    void aDecodeSilentForHalfTheStallTimeoutIsSuspectedAndOneThatSpeaksIsNot() {
        StreamWatch.Stream talking = watch.start(GOOD);
        watch.start(STUCK);
        for (int i = 0; i < 6; i++) {
            clock.advanceTimeBy(Duration.ofMillis(500));
            talking.progressed();
        }

        // 3 s of silence on a 4 s stall timeout: asked about, not ejected
        assertThat(suspects).containsOnly(STUCK);
        assertThat(health.usable(STUCK)).isTrue();
    }
}
