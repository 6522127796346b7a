package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class PollsTest {

    @Test
    void byDefaultALayerIsSeenReadyWithinOneMillisecondOfTurningReady() {
        VirtualTimeScheduler time = VirtualTimeScheduler.getOrSet();
        try {
            AtomicBoolean seen = new AtomicBoolean();
            Polls.layerReady(SimulatedLayerEvent.readyAfter(time, Duration.ofMillis(5)))
                    .subscribe(null, null, () -> seen.set(true));

            time.advanceTimeBy(Duration.ofNanos(4_999_999));
            boolean early = seen.get();
            time.advanceTimeBy(Duration.ofNanos(1));

            assertThat(Polls.DEFAULT_EVENT_POLL).isEqualTo(Duration.ofMillis(1));
            assertThat(early).isFalse();
            assertThat(seen).isTrue();
        } finally {
            VirtualTimeScheduler.reset();
        }
    }

    @Test
    void aPollPeriodThatIsNotPositiveIsRefusedWithTheDefaultsAsTheyAreWritten() {
        SimulatedLayerEvent event = SimulatedLayerEvent.readyAfter(VirtualTimeScheduler.create(), Duration.ZERO);
        assertThatThrownBy(() -> Polls.layerReady(event, Duration.ZERO, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("poll period must be positive, got 0s; the operators poll an event every 1ms"
                        + " and a status every 10ms by default");
    }

    @Test
    void anEventThatNeverTurnsReadyFailsWithErrGpuOpAtThe30sDefaultInVirtualTime() {
        StepVerifier.withVirtualTime(() -> Polls.layerReady(() -> EventState.NOT_READY))
                .expectSubscription()
                .expectNoEvent(Polls.DEFAULT_EVENT_TIMEOUT.minusMillis(1))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferException.class)
                        .hasMessageContaining("layer event was not ready after 30s")
                        .satisfies(t -> assertThat(((TransferException) t).code()).isEqualTo(StatusCode.ERR_GPU_OP)))
                .verify(Duration.ofSeconds(5));
        assertThat(Polls.DEFAULT_EVENT_TIMEOUT).isEqualTo(Duration.ofSeconds(30));
    }

    @Test
    void anEventWaitTakesItsOwnBound() {
        StepVerifier.withVirtualTime(() -> Polls.layerReady(() -> EventState.NOT_READY, Duration.ofMillis(1),
                        Duration.ofMillis(250), null))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(249))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(e).hasMessageEndingWith("layer event was not ready after 250ms"))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aStatusThatNeverEndsTimesOutAtThe30sDefaultAsACompletionWaitDoes() {
        TransferStatus forever = new TransferStatus() {
            @Override
            public StatusCode code() {
                return StatusCode.IN_PROGRESS;
            }

            @Override
            public String message() {
                return "";
            }
        };
        StepVerifier.withVirtualTime(() -> Polls.terminal(forever))
                .expectSubscription()
                .expectNoEvent(Polls.DEFAULT_STATUS_TIMEOUT.minusMillis(1))
                .thenAwait(Duration.ofMillis(1))
                .expectErrorSatisfies(e -> assertThat(e).isInstanceOf(TransferException.class)
                        .satisfies(t -> assertThat(((TransferException) t).isTimeout()).isTrue()))
                .verify(Duration.ofSeconds(5));
    }

    @Test
    void aPollTimeoutThatIsNotPositiveIsRefusedWithTheDefault() {
        assertThatThrownBy(() -> Polls.layerReady(() -> EventState.READY, Duration.ofMillis(1), Duration.ZERO, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("event poll timeout must be positive, got 0s; the default is 30s");
    }
}
