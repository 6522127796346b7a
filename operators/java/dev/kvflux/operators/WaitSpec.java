package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import java.time.Duration;
import java.util.Objects;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * How a wait waits: its fail mode, its transfer timeout, its slice, its stall time, its scheduler and its
 * recorder. One immutable value for the four strategies, each of which takes the settings that apply to it
 * (see {@code of(spec)} on {@link CompletionWait}, {@link PushWait}, {@link SlicedNativeWait} and
 * {@link NativeWait}), so that one spec can make any of them:
 *
 * <pre>{@code
 * WaitSpec spec = WaitSpec.failFast(Duration.ofSeconds(30)).stallAfter(Duration.ofSeconds(5));
 * WaitStrategy polled = CompletionWait.of(spec);
 * WaitStrategy pushed = PushWait.of(spec);
 * }</pre>
 *
 * <p>Every spec is valid: the canonical constructor, the factories and the withers all check it, and refuse a
 * bad value with an {@link IllegalArgumentException} that says how to fix it (a null mode, timeout, slice or
 * recorder with a {@link NullPointerException} naming it).
 *
 * @param mode how a failed status is treated while others are in flight ({@link FailMode})
 * @param transferTimeout how long the wait may take in all: positive, at most {@link #MAX_TRANSFER_TIMEOUT}
 * @param slice how often statuses are queried ({@link #DEFAULT_SLICE} unless set): positive, at most the
 *     transfer timeout
 * @param stallAfter how long no status may leave flight while some are in flight before the wait fails as
 *     stalled; null (the default) turns stall detection off; otherwise between the slice and the transfer
 *     timeout
 * @param scheduler where the wait runs its queries and its timers; null (the default) for the strategy's
 *     own default, looked up at subscription ({@code Schedulers.parallel()} for the reactive waits,
 *     {@code Schedulers.boundedElastic()} for the native ones)
 * @param recorder where the wait reports ({@link WaitRecorder#NOOP}, the default, records nothing); kept
 *     wrapped so that what it throws never changes how a wait ends
 */
public record WaitSpec(FailMode mode, Duration transferTimeout, Duration slice, Duration stallAfter,
                       Scheduler scheduler, WaitRecorder recorder) {

    /**
     * 10 ms, the slice vLLM's sliced native wait uses: short against a copy (a wait ends at most this long
     * after the last one), long against a status query (a waiting request costs one query per status per slice).
     */
    public static final Duration DEFAULT_SLICE = Duration.ofMillis(10);

    /** The longest transfer timeout accepted; anything longer is a configuration mistake. */
    public static final Duration MAX_TRANSFER_TIMEOUT = Duration.ofHours(24);

    /**
     * Checks every setting (see the class comment).
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours, the slice is not
     *     positive or longer than the timeout, or {@code stallAfter} lies outside the slice and the timeout
     */
    public WaitSpec {
        Objects.requireNonNull(mode, "mode");
        checkTimeout(transferTimeout);
        checkSlice(slice, transferTimeout);
        if (stallAfter != null) {
            checkStallAfter(stallAfter, slice, transferTimeout);
        }
        recorder = WaitRecording.safe(recorder);
    }

    /**
     * A fail-fast spec (the WRITE path) with the default slice, no stall detection, the strategy's default
     * scheduler and no recorder.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static WaitSpec failFast(Duration transferTimeout) {
        return of(FailMode.FAIL_FAST, transferTimeout);
    }

    /**
     * A draining spec (the READ barrier), otherwise as {@link #failFast}.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static WaitSpec drain(Duration transferTimeout) {
        return of(FailMode.DRAIN, transferTimeout);
    }

    /**
     * A spec in the given mode, otherwise as {@link #failFast}.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static WaitSpec of(FailMode mode, Duration transferTimeout) {
        return new WaitSpec(mode, transferTimeout, DEFAULT_SLICE, null, null, WaitRecorder.NOOP);
    }

    /**
     * This spec with another slice.
     *
     * @throws IllegalArgumentException if {@code slice} is not positive, is longer than the timeout, or is
     *     longer than the stall time set
     */
    public WaitSpec slice(Duration slice) {
        return new WaitSpec(mode, transferTimeout, slice, stallAfter, scheduler, recorder);
    }

    /**
     * This spec, failing early when the transfer stalls: when no status has left flight for
     * {@code stallAfter} while some are still in flight. A stall is told apart from slowness by progress,
     * not by total time: a transfer whose statuses keep completing runs on to the transfer timeout.
     *
     * @throws IllegalArgumentException if {@code stallAfter} is shorter than the slice or longer than the
     *     transfer timeout
     */
    public WaitSpec stallAfter(Duration stallAfter) {
        return new WaitSpec(mode, transferTimeout, slice, Objects.requireNonNull(stallAfter, "stallAfter"),
                scheduler, recorder);
    }

    /** This spec with the wait's queries and timers on {@code scheduler}. */
    public WaitSpec scheduler(Scheduler scheduler) {
        return new WaitSpec(mode, transferTimeout, slice, stallAfter, Objects.requireNonNull(scheduler, "scheduler"),
                recorder);
    }

    /** This spec, reporting each wait to {@code recorder}; {@link WaitRecorder#NOOP} turns recording off. */
    public WaitSpec recorder(WaitRecorder recorder) {
        return new WaitSpec(mode, transferTimeout, slice, stallAfter, scheduler, recorder);
    }

    /**
     * The reactive waits' scheduler: the one set, else {@link Schedulers#parallel()}, looked up by this call;
     * so call it at subscription.
     */
    Scheduler schedulerOrParallel() {
        return scheduler != null ? scheduler : Schedulers.parallel();
    }

    /**
     * The native waits' blocking scheduler: the one set, else {@link Schedulers#boundedElastic()}, looked up
     * by this call; so call it at subscription.
     */
    Scheduler schedulerOrBoundedElastic() {
        return scheduler != null ? scheduler : Schedulers.boundedElastic();
    }

    /** Whether the wait reports to a recorder other than {@link WaitRecorder#NOOP}. */
    boolean recording() {
        return recorder != WaitRecorder.NOOP;
    }

    /** {@code FAIL_FAST, timeout 30s, slice 10ms}, then the stall time and whether it records, if so. */
    String describe() {
        return mode + ", timeout " + DurationText.of(transferTimeout) + ", slice " + DurationText.of(slice)
                + (stallAfter != null ? ", stall after " + DurationText.of(stallAfter) : "")
                + (recording() ? ", recorded" : "");
    }

    @Override
    public String toString() {
        return "WaitSpec[" + describe() + (scheduler != null ? ", on " + scheduler : "") + "]";
    }

    private static void checkTimeout(Duration transferTimeout) {
        Objects.requireNonNull(transferTimeout, "transferTimeout");
        if (transferTimeout.isZero() || transferTimeout.isNegative()) {
            throw new IllegalArgumentException("transfer timeout must be finite and greater than zero, got "
                    + DurationText.of(transferTimeout) + "; the default is 30s");
        }
        if (transferTimeout.compareTo(MAX_TRANSFER_TIMEOUT) > 0) {
            throw new IllegalArgumentException("transfer timeout " + DurationText.of(transferTimeout)
                    + " is longer than 24 hours; a stalled transfer would hold its request that long."
                    + " Use seconds to minutes (the default is 30s)");
        }
    }

    private static void checkSlice(Duration slice, Duration transferTimeout) {
        Objects.requireNonNull(slice, "slice");
        if (slice.isZero() || slice.isNegative()) {
            throw new IllegalArgumentException("slice must be positive, got " + DurationText.of(slice)
                    + "; the default is " + DurationText.of(DEFAULT_SLICE));
        }
        if (slice.compareTo(transferTimeout) > 0) {
            throw new IllegalArgumentException("slice " + DurationText.of(slice) + " is longer than the transfer"
                    + " timeout " + DurationText.of(transferTimeout) + "; choose a slice well under the timeout ("
                    + DurationText.of(DEFAULT_SLICE) + " is the default)");
        }
    }

    /** Rejects a stall time shorter than the slice or longer than the transfer timeout. */
    private static void checkStallAfter(Duration stallAfter, Duration slice, Duration transferTimeout) {
        if (stallAfter.compareTo(slice) < 0 || stallAfter.compareTo(transferTimeout) > 0) {
            throw new IllegalArgumentException("stallAfter " + DurationText.of(stallAfter)
                    + " must lie between the slice (" + DurationText.of(slice) + ") and the transfer timeout ("
                    + DurationText.of(transferTimeout) + "); choose a few times the longest gap you expect"
                    + " between two copies finishing");
        }
    }
}
