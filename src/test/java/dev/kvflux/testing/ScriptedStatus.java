package dev.kvflux.testing;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.scheduler.Scheduler;

/**
 * A status that turns terminal, like an xGMI status, only when queried at or after its time on the
 * given scheduler's clock, counted from the status's creation. Counts its queries. {@code never()} stays IN_PROGRESS for ever.
 * Once SUCCESS it says its copies ended at its time, on the scheduler's clock, as a backend that knows would.
 */
public final class ScriptedStatus implements TransferStatus {
    private final Scheduler clock;
    private final long atNanos;
    private final StatusCode finalCode;
    private final String finalMessage;
    private final AtomicInteger queries = new AtomicInteger();
    private volatile StatusCode code = StatusCode.IN_PROGRESS;
    private volatile long bytes = -1;

    private ScriptedStatus(Scheduler clock, long atNanos, StatusCode finalCode, String finalMessage) {
        this.clock = clock;
        long now = clock.now(TimeUnit.NANOSECONDS);
        this.atNanos = atNanos == Long.MAX_VALUE ? Long.MAX_VALUE : now + atNanos;
        this.finalCode = finalCode;
        this.finalMessage = finalMessage;
    }

    public static ScriptedStatus succeedsAt(Scheduler clock, Duration at) {
        return new ScriptedStatus(clock, at.toNanos(), StatusCode.SUCCESS, "");
    }

    public static ScriptedStatus failsAt(Scheduler clock, Duration at, StatusCode code, String message) {
        return new ScriptedStatus(clock, at.toNanos(), code, message);
    }

    public static ScriptedStatus never(Scheduler clock) {
        return new ScriptedStatus(clock, Long.MAX_VALUE, StatusCode.SUCCESS, "");
    }

    /** A status never posted: INIT until its time, then the final code. */
    public static ScriptedStatus initUntil(Scheduler clock, Duration at) {
        ScriptedStatus status = new ScriptedStatus(clock, at.toNanos(), StatusCode.SUCCESS, "");
        status.code = StatusCode.INIT;
        return status;
    }

    @Override
    public StatusCode code() {
        queries.incrementAndGet();
        if (!code.isTerminal() && clock.now(TimeUnit.NANOSECONDS) >= atNanos) {
            code = finalCode;
        }
        return code;
    }

    @Override
    public String message() {
        return code.isTerminal() ? finalMessage : "";
    }

    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? atNanos : UNKNOWN_TIME;
    }

    @Override
    public long clockNanos() {
        return clock.now(TimeUnit.NANOSECONDS);
    }

    /** This status, telling that its batch moves {@code bytes} (by default it does not tell: -1). */
    public ScriptedStatus moving(long bytes) {
        this.bytes = bytes;
        return this;
    }

    @Override
    public long bytes() {
        return bytes;
    }

    public int queries() {
        return queries.get();
    }
}
