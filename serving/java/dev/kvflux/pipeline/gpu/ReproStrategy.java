package dev.kvflux.pipeline.gpu;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitStrategy;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * The four ways the GPU reproducer waits for a request's statuses, run one after another in one run:
 * MoRI's native bounded {@code waitAll} with the whole timeout ({@link NativeWait}); the seed's fix on the
 * native call, 10 ms slices ({@link SlicedNativeWait}); kvflux's reactive wait, 10 ms poll
 * ({@link CompletionWait}); kvflux's push wait, host function per batch ({@link PushWait}).
 */
enum ReproStrategy {
    NATIVE("native", false),
    SLICED_NATIVE("sliced-native", false),
    REACTIVE("reactive", false),
    REACTIVE_PUSH("reactive-push", true);

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

    /** The operator this strategy times, with its default slice, on {@code engine} for the native ones. */
    WaitStrategy wait(TransferEngine engine, Duration timeout) {
        return switch (this) {
            case NATIVE -> NativeWait.of(engine, timeout);
            case SLICED_NATIVE -> SlicedNativeWait.failFast(engine, timeout);
            case REACTIVE -> CompletionWait.failFast(timeout);
            case REACTIVE_PUSH -> PushWait.of(timeout);
        };
    }

    /**
     * Blocks the calling thread (the reproducer's own, never a Reactor non-blocking one) until the wait
     * ends, and returns "ok" or the error's message, as the seed's reproducer prints it.
     */
    String await(TransferEngine engine, List<? extends TransferStatus> statuses, Duration timeout) {
        try {
            wait(engine, timeout).await(statuses).block();
            return "ok";
        } catch (TransferException e) {
            return e.getMessage();
        }
    }
}
