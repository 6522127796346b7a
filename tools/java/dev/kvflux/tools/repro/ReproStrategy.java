package dev.kvflux.tools.repro;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.NativeWait;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.SlicedNativeWait;
import dev.kvflux.operators.WaitStrategy;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The wait strategies kvflux times, by name, for {@code kvflux repro --wait} and {@code kvflux bench
 * --strategies} alike: MoRI's native bounded {@code waitAll} with the whole timeout ({@link NativeWait},
 * the whole-timeout wait); the native call in slices ({@link SlicedNativeWait}, vLLM's fix); vLLM's MoRIIO
 * connector's wait today, one thread querying every status of every request every 1 ms ({@link SweepWait}); kvflux's
 * reactive polled wait ({@link CompletionWait}), with an interval per request or on the shared poll driver, or
 * adaptive (dense polls around the predicted end of the copies, the rate learnt over the strategy's requests);
 * kvflux's push wait, one host function per batch ({@link PushWait}), signalling its end on the scheduler or, as
 * {@code reactive-push-direct}, on the thread of the push that ended it ({@link PushWait#signalOnPush()}).
 *
 * <p>To add one, add a constant with its name, how many requests {@code kvflux repro} times when
 * {@code --requests} is not given, whether its batches are posted with a pushing host function and whether
 * it calls the engine, and a case in {@link #wait(TransferEngine, FailMode, Duration)}.
 */
public enum ReproStrategy {
    NATIVE("native", 2, false, true),
    SLICED_NATIVE("sliced-native", 100, false, true),
    POLL_1MS(SweepWait.NAME, 100, false, false),
    REACTIVE("reactive", 100, false, false),
    REACTIVE_SHARED("reactive-shared", 100, false, false),
    REACTIVE_ADAPTIVE("reactive-adaptive", 100, false, false),
    REACTIVE_PUSH("reactive-push", 100, true, false),
    REACTIVE_PUSH_DIRECT("reactive-push-direct", 100, true, false);

    private final String label;
    private final int defaultRequests;
    private final boolean push;
    private final boolean callsEngine;

    ReproStrategy(String label, int defaultRequests, boolean push, boolean callsEngine) {
        this.label = label;
        this.defaultRequests = defaultRequests;
        this.push = push;
        this.callsEngine = callsEngine;
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
     * Whether the wait calls the engine's {@code waitAll} (the native strategies); the others only query
     * the statuses, so they need no engine.
     */
    public boolean callsEngine() {
        return callsEngine;
    }

    /** Every strategy's name, in order. */
    public static List<String> labels() {
        return Arrays.stream(values()).map(ReproStrategy::label).toList();
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
                + String.join(", ", labels()));
    }

    /** The operator this strategy times, failing fast, with the operators' default slice, on {@code engine} for the native ones. */
    public WaitStrategy wait(TransferEngine engine, Duration timeout) {
        return wait(engine, FailMode.FAIL_FAST, timeout);
    }

    /**
     * The operator this strategy times in {@code mode}, with the operators' default slice; {@code engine}
     * serves the native ones and may be null for the others. The whole-timeout wait has one mode: its one
     * {@code waitAll} ends when the engine says.
     */
    public WaitStrategy wait(TransferEngine engine, FailMode mode, Duration timeout) {
        return switch (this) {
            case NATIVE -> NativeWait.of(engine, timeout);
            case SLICED_NATIVE -> SlicedNativeWait.of(engine, mode, timeout);
            case POLL_1MS -> SweepWait.of(mode, timeout);
            case REACTIVE -> CompletionWait.of(mode, timeout);
            case REACTIVE_SHARED -> CompletionWait.of(mode, timeout).sharedPoll();
            case REACTIVE_ADAPTIVE -> CompletionWait.of(mode, timeout).adaptive();
            case REACTIVE_PUSH -> PushWait.of(mode, timeout);
            case REACTIVE_PUSH_DIRECT -> PushWait.of(mode, timeout).signalOnPush();
        };
    }

    /**
     * As {@link #wait(TransferEngine, Duration)}, with {@code slice} for the strategies that wait in slices
     * (sliced-native, reactive, reactive-shared); the others ignore it (poll-1ms sweeps every 1 ms, as vLLM does).
     *
     * @throws IllegalArgumentException if the strategy slices and {@code slice} is not one it accepts
     */
    public WaitStrategy wait(TransferEngine engine, Duration timeout, Duration slice) {
        return wait(engine, FailMode.FAIL_FAST, timeout, slice);
    }

    /** As {@link #wait(TransferEngine, FailMode, Duration)}, with {@code slice} for the strategies that wait in slices. */
    public WaitStrategy wait(TransferEngine engine, FailMode mode, Duration timeout, Duration slice) {
        return switch (wait(engine, mode, timeout)) {
            case SlicedNativeWait sliced -> sliced.slice(slice);
            case CompletionWait polled -> polled.slice(slice);
            case WaitStrategy other -> other;
        };
    }
}
