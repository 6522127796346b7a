package dev.kvflux.testing;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * A status whose backend pushes its terminal code at its time on the given scheduler (counted from its
 * creation), as a GPU host function would, and says its copies ended then. Counts its queries.
 */
public final class ScheduledPushStatus extends CountedStatus {
    private final Sinks.One<StatusCode> sink = Sinks.one();

    private ScheduledPushStatus(Scheduler clock, Duration at, StatusCode terminal) {
        super(clock);
        clock.schedule(() -> {
            endNanos = terminal == StatusCode.SUCCESS ? clock.now(TimeUnit.NANOSECONDS) : UNKNOWN_TIME;
            code = terminal;
            sink.tryEmitValue(terminal);
        }, at.toNanos(), TimeUnit.NANOSECONDS);
    }

    public static ScheduledPushStatus succeedsAt(Scheduler clock, Duration at) {
        return new ScheduledPushStatus(clock, at, StatusCode.SUCCESS);
    }

    public static ScheduledPushStatus failsAt(Scheduler clock, Duration at, StatusCode code) {
        return new ScheduledPushStatus(clock, at, code);
    }

    @Override
    public Mono<StatusCode> pushed() {
        return sink.asMono();
    }

    public int queries() {
        return queries.get();
    }
}
