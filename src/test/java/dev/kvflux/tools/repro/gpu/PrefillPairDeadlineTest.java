package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;

/** How {@code finish} waits for a request's copy-end events, with a fake clock and fake events. */
class PrefillPairDeadlineTest {
    private static final long SECOND = 1_000_000_000L;

    /** A clock that moves one second each time it is read. */
    private final AtomicLong now = new AtomicLong();
    private final LongSupplier clock = () -> now.getAndAdd(SECOND);

    /** An event that turns ready at its {@code readyAt}-th query (never, if 0) and counts queries. */
    private static final class Event implements LayerEvent {
        final AtomicInteger queries = new AtomicInteger();
        final int readyAt;

        Event(int readyAt) {
            this.readyAt = readyAt;
        }

        @Override
        public EventState query() {
            int n = queries.incrementAndGet();
            return readyAt > 0 && n >= readyAt ? EventState.READY : EventState.NOT_READY;
        }
    }

    @Test
    void anEventAlreadyReadyCostsOneQuery() {
        Event done = new Event(1);
        PrefillPair.awaitReady(done, 40 * SECOND, clock, () -> "hung");
        assertThat(done.queries).hasValue(1);
    }

    @Test
    void anEventThatTurnsReadyBeforeTheDeadlineEndsTheWait() {
        Event late = new Event(5);
        PrefillPair.awaitReady(late, 40 * SECOND, clock, () -> "hung");
        assertThat(late.queries).hasValue(5);
    }

    @Test
    void anEventNeverReadyFailsAtTheDeadlineWithTheGivenMessage() {
        Event never = new Event(0);
        assertThatThrownBy(() -> PrefillPair.awaitReady(never, 40 * SECOND, clock,
                () -> "the copies of layer 3 were not done: the GPU looks hung"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("the copies of layer 3 were not done: the GPU looks hung");
        assertThat(now.get()).isEqualTo(41 * SECOND);
    }

    @Test
    void aFailedEventFailsTheWaitWithTheRuntimesError() {
        LayerEvent failed = () -> {
            throw new IllegalStateException("cudaEventQuery failed: cudaErrorLaunchFailure (719)");
        };
        assertThatThrownBy(() -> PrefillPair.awaitReady(failed, 40 * SECOND, clock, () -> "hung"))
                .hasMessageContaining("cudaErrorLaunchFailure");
    }
}
