package dev.kvflux.operators;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
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
}
