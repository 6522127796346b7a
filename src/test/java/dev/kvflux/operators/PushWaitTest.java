package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.testing.ScriptedStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class PushWaitTest {

    /** A status the test pushes; counts queries so a test can show nobody polled it. */
    private static final class Pushed implements PushedStatus {
        final Sinks.One<StatusCode> sink = Sinks.one();
        volatile StatusCode code = StatusCode.IN_PROGRESS;
        volatile int queries;

        void push(StatusCode terminal) {
            code = terminal;
            sink.tryEmitValue(terminal);
        }

        @Override
        public Mono<StatusCode> pushed() {
            return sink.asMono();
        }

        @Override
        public StatusCode code() {
            queries++;
            return code;
        }

        @Override
        public String message() {
            return code.isFailure() ? "copy failed" : "";
        }
    }

    @Test
    void theWaitEndsWhenTheLastStatusIsPushedAfterOneQueryAtSubscription() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.of(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> a.push(StatusCode.SUCCESS))
                .expectNoEvent(Duration.ofSeconds(1))
                .then(() -> b.push(StatusCode.SUCCESS))
                .verifyComplete();
        assertThat(a.queries).isEqualTo(1);
        assertThat(b.queries).isEqualTo(1);
    }

    @Test
    void statusesAlreadyDoneAtSubscriptionNeedNoPush() {
        Pushed done = new Pushed();
        done.code = StatusCode.SUCCESS;
        StepVerifier.withVirtualTime(() -> PushWait.of(Duration.ofSeconds(30)).await(List.of(done)))
                .expectSubscription()
                .expectComplete()
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aPushedFailureErrorsAtOnceWithItsCodeAndMessage() {
        Pushed a = new Pushed();
        Pushed b = new Pushed();
        StepVerifier.withVirtualTime(() -> PushWait.of(Duration.ofSeconds(30)).await(List.of(a, b)))
                .expectSubscription()
                .then(() -> b.push(StatusCode.ERR_GPU_OP))
                .expectErrorSatisfies(e -> {
                    assertThat(e).isInstanceOf(TransferException.class);
                    assertThat(((TransferException) e).code()).isEqualTo(StatusCode.ERR_GPU_OP);
                    assertThat(((TransferException) e).reason()).isEqualTo("copy failed");
                })
                .verify();
    }

    @Test
    void statusesStillInFlightAtTheTimeoutFailWithTheSeedsMessage() {
        StepVerifier.withVirtualTime(() -> PushWait.of(Duration.ofSeconds(3)).await(List.of(new Pushed())))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(2999))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorMessage("MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 3s")
                .verify();
    }

    @Test
    void aStatusThatDoesNotPushIsPolledEverySlice() {
        VirtualTimeScheduler time = VirtualTimeScheduler.getOrSet();
        try {
            ScriptedStatus polled = ScriptedStatus.succeedsAt(time, Duration.ofMillis(25));
            StepVerifier.withVirtualTime(() -> PushWait.of(Duration.ofSeconds(3)).await(List.of(polled)))
                    .expectSubscription()
                    .expectNoEvent(Duration.ofMillis(29))
                    .thenAwait(Duration.ofMillis(1))
                    .verifyComplete();
        } finally {
            VirtualTimeScheduler.reset();
        }
    }
}
