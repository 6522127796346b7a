package dev.kvflux.testing;

import dev.kvflux.bindings.PushedStatus;
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
public final class ScheduledPushStatus implements PushedStatus {
    private final Scheduler clock;
    private final Sinks.One<StatusCode> sink = Sinks.one();
    private volatile StatusCode code = StatusCode.IN_PROGRESS;
    private volatile long completedAt = UNKNOWN_TIME;
    private volatile int queries;

    private ScheduledPushStatus(Scheduler clock, Duration at, StatusCode terminal) {
        this.clock = clock;
        clock.schedule(() -> {
            completedAt = terminal == StatusCode.SUCCESS ? clock.now(TimeUnit.NANOSECONDS) : UNKNOWN_TIME;
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

    @Override
    public StatusCode code() {
        queries++;
        return code;
    }

    @Override
    public String message() {
        return code.isFailure() ? "copy failed" : "";
    }

    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? completedAt : UNKNOWN_TIME;
    }

    @Override
    public long clockNanos() {
        return clock.now(TimeUnit.NANOSECONDS);
    }

    public int queries() {
        return queries;
    }
}
