package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;
import reactor.test.scheduler.VirtualTimeScheduler;

class PollsTest {

    @Test
    void byDefaultALayerIsSeenReadyWithinOneMillisecondOfTurningReady() {
        assertThat(Polls.DEFAULT_EVENT_POLL).isEqualTo(Duration.ofMillis(1));
        StepVerifier.withVirtualTime(() -> Polls.layerReady(
                        SimulatedLayerEvent.readyAfter(VirtualTimeScheduler.get(), Duration.ofMillis(5))))
                .expectSubscription()
                .expectNoEvent(Duration.ofMillis(4))
                .thenAwait(Duration.ofMillis(1))
                .verifyComplete();
    }

    @Test
    void aPollPeriodThatIsNotPositiveIsRefusedWithTheDefaultsAsTheyAreWritten() {
        SimulatedLayerEvent event = SimulatedLayerEvent.readyAfter(VirtualTimeScheduler.create(), Duration.ZERO);
        assertThatThrownBy(() -> Polls.layerReady(event, Duration.ZERO, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("poll period must be positive, got 0s; the operators poll an event every 1ms"
                        + " and a status every 10ms by default");
    }
}
