package dev.kvflux.tools.repro;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitStrategy;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;

/**
 * The wait strategies the reproducers time, by name, for {@code kvflux repro --wait} and the GPU
 * reproducer's {@code --strategies} alike: MoRI's native bounded {@code waitAll} with the whole timeout
 * ({@link NativeWait}); the native call in slices ({@link SlicedNativeWait}); kvflux's reactive polled wait
 * ({@link CompletionWait}); kvflux's push wait, one host function per batch ({@link PushWait}).
 *
 * <p>To add one, add a constant with its name, how many requests {@code kvflux repro} times when
 * {@code --requests} is not given, whether its batches are posted with a pushing host function, and a
 * case in {@link #wait(TransferEngine, Duration)}.
 */
public enum ReproStrategy {
    NATIVE("native", 2, false),
    SLICED_NATIVE("sliced-native", 100, false),
    REACTIVE("reactive", 100, false),
    REACTIVE_PUSH("reactive-push", 100, true);

    private final String label;
    private final int defaultRequests;
    private final boolean push;

    ReproStrategy(String label, int defaultRequests, boolean push) {
        this.label = label;
        this.defaultRequests = defaultRequests;
        this.push = push;
    }

    /** The name options take and reports print: {@code sliced-native}. */
    public String label() {
        return label;
    }

    /** How many waits {@code kvflux repro} times with it when {@code --requests} is not given. */
    public int defaultRequests() {
        return defaultRequests;
    }

    /** Whether batches are posted with a host function that pushes their completion. */
    public boolean push() {
        return push;
    }

    /**
     * The strategy called {@code name}, ignoring case and surrounding blanks.
     *
     * @throws IllegalArgumentException naming the known strategies if there is none by that name
     */
    public static ReproStrategy named(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (ReproStrategy s : values()) {
            if (s.label.equals(n)) {
                return s;
            }
        }
        throw new IllegalArgumentException("unknown wait strategy '" + name + "'; known strategies: "
                + String.join(", ", Arrays.stream(values()).map(ReproStrategy::label).toList()));
    }

    /** The operator this strategy times, with the operators' default slice, on {@code engine} for the native ones. */
    public WaitStrategy wait(TransferEngine engine, Duration timeout) {
        return switch (this) {
            case NATIVE -> NativeWait.of(engine, timeout);
            case SLICED_NATIVE -> SlicedNativeWait.failFast(engine, timeout);
            case REACTIVE -> CompletionWait.failFast(timeout);
            case REACTIVE_PUSH -> PushWait.failFast(timeout);
        };
    }

    /**
     * As {@link #wait(TransferEngine, Duration)}, with {@code slice} for the strategies that wait in slices
     * (sliced-native, reactive); the others ignore it.
     *
     * @throws IllegalArgumentException if the strategy slices and {@code slice} is not one it accepts
     */
    public WaitStrategy wait(TransferEngine engine, Duration timeout, Duration slice) {
        return switch (wait(engine, timeout)) {
            case SlicedNativeWait sliced -> sliced.slice(slice);
            case CompletionWait polled -> polled.slice(slice);
            case WaitStrategy other -> other;
        };
    }
}
