package dev.kvflux.pipeline.gpu;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.TransferException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * The four ways the GPU reproducer waits for a request's statuses, run one after another in one run:
 * MoRI's native bounded {@code waitAll} with the whole timeout; the seed's fix on the native call (10 ms
 * slices); kvflux's reactive wait (10 ms poll); kvflux's push wait (host function per batch).
 */
enum ReproStrategy {
    NATIVE("native", false),
    SLICED_NATIVE("sliced-native", false),
    REACTIVE("reactive", false),
    REACTIVE_PUSH("reactive-push", true);

    static final Duration SLICE = CompletionWait.DEFAULT_SLICE;

    private final String label;
    private final boolean push;

    ReproStrategy(String label, boolean push) {
        this.label = label;
        this.push = push;
    }

    String label() {
        return label;
    }

    /** Whether batches are posted with a host function that pushes their completion. */
    boolean push() {
        return push;
    }

    static ReproStrategy named(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (ReproStrategy s : values()) {
            if (s.label.equals(n)) {
                return s;
            }
        }
        throw new IllegalArgumentException("unknown strategy '" + name
                + "': use native, sliced-native, reactive or reactive-push");
    }

    /**
     * Waits on the calling thread (never a Reactor non-blocking one) and returns "ok" or the error's
     * message, as the seed's reproducer prints it.
     */
    String await(TransferEngine engine, List<? extends TransferStatus> statuses, Duration timeout) {
        try {
            switch (this) {
                case NATIVE -> check(engine.waitAll(statuses, timeout.toMillis()), timeout);
                case SLICED_NATIVE -> sliced(engine, statuses, timeout);
                case REACTIVE -> CompletionWait.failFast(timeout).await(statuses).block();
                case REACTIVE_PUSH -> PushWait.of(timeout).await(statuses).block();
            }
            return "ok";
        } catch (TransferException e) {
            return e.getMessage();
        }
    }

    /** The seed's fix: the native wait in slices of at most 10 ms, statuses checked between calls. */
    private static void sliced(TransferEngine engine, List<? extends TransferStatus> statuses, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long leftMs = Math.max(0, (deadline - System.nanoTime()) / 1_000_000);
            StatusCode code = engine.waitAll(statuses, Math.min(SLICE.toMillis(), leftMs));
            if (code == StatusCode.SUCCESS || code.isFailure()) {
                check(code, timeout);
                return;
            }
            if (System.nanoTime() - deadline >= 0) {
                check(code, timeout);
                return;
            }
        }
    }

    private static void check(StatusCode code, Duration timeout) {
        if (code == StatusCode.SUCCESS) {
            return;
        }
        if (code.isFailure()) {
            throw TransferException.failed(code, "a batch failed");
        }
        throw TransferException.timedOut(timeout);
    }
}
