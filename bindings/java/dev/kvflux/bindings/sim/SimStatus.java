package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;

/**
 * One batch's status on the simulated engine. Like an xGMI status it has no thread of its own: it
 * turns terminal only inside {@link #code()}, when that query runs at or after the time the copy
 * becomes observable (its finish, pushed back past queued prefill steps on the scatter/gather path) or
 * the time its injected failure fires. A failure is sticky.
 */
final class SimStatus implements TransferStatus {
    static final long NEVER = Long.MAX_VALUE;

    private final SimulatedXgmiEngine engine;
    private final long ordinal;
    private final long postedAt;
    private final long finishAt;
    private final long failAt;
    private final StatusCode failCode;
    private final String failMessage;
    private final long bytes;
    private volatile StatusCode code = StatusCode.IN_PROGRESS;
    private volatile String message = "";

    SimStatus(SimulatedXgmiEngine engine, long ordinal, long postedAt, long finishAt, long failAt,
              StatusCode failCode, String failMessage, long bytes) {
        this.engine = engine;
        this.bytes = bytes;
        this.ordinal = ordinal;
        this.postedAt = postedAt;
        this.finishAt = finishAt;
        this.failAt = failAt;
        this.failCode = failCode;
        this.failMessage = failMessage;
    }

    @Override
    public StatusCode code() {
        StatusCode now = code;
        if (now == StatusCode.IN_PROGRESS) {
            synchronized (this) {
                if (code == StatusCode.IN_PROGRESS) {
                    long t = engine.clock().now();
                    if (failAt != NEVER && t >= failAt) {
                        message = failMessage;
                        code = failCode;
                    } else if (failAt == NEVER && t >= observableAt()) {
                        code = StatusCode.SUCCESS;
                    }
                }
                now = code;
            }
        }
        return now;
    }

    @Override
    public long bytes() {
        return bytes;
    }

    @Override
    public String message() {
        return message;
    }

    /** The time the copy finished on the link, once a query has seen it SUCCESS; the engine's clock. */
    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? finishAt : UNKNOWN_TIME;
    }

    /** The engine's clock: its scheduler's virtual or real time, or {@link System#nanoTime()}. */
    @Override
    public long clockNanos() {
        return engine.clock().now();
    }

    /** When a query will next find this status changed: its failure or its observable finish. */
    long nextChangeAt() {
        return failAt != NEVER ? failAt : observableAt();
    }

    long observableAt() {
        return finishAt == NEVER ? NEVER : engine.observableAt(finishAt);
    }

    long ordinal() {
        return ordinal;
    }

    long postedAt() {
        return postedAt;
    }

    /** The time the copy finished on the link, or {@link #NEVER} for a stalled or failing batch. */
    long finishAt() {
        return finishAt;
    }

    @Override
    public String toString() {
        return "SimStatus[batch " + ordinal + ", " + code + "]";
    }
}
