package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The reference strategy {@code sliced-native}, the wait vLLM's MoRI-IO connector adopted: {@link TransferEngine#waitAll} with
 * at most one slice (10 ms by default) on the statuses still in flight, the statuses checked without
 * blocking between calls, until the transfer timeout.
 *
 * <p>Between calls: every status SUCCESS → complete; a status failed → error at once
 * ({@link FailMode#FAIL_FAST}) or once nothing is in flight ({@link FailMode#DRAIN}),
 * the earliest failed status in the list giving the code and message; a status that breaks the
 * {@link TransferStatus} contract (null in the list, a {@code code()} that throws or returns null) → error
 * ERR_BAD_STATE with the thrown exception as cause, at once in either mode; {@code waitAll} returned an error
 * that no status shows → error with that code; the deadline passed with statuses in flight → error
 * IN_PROGRESS and the message
 * {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s}. Errors are {@link TransferException}s with the same
 * messages as {@link CompletionWait}.
 *
 * <p>The loop blocks a thread for the whole wait: it runs on the blocking scheduler
 * ({@link Schedulers#boundedElastic()} unless set, looked up at subscription). The deadline is read on
 * the clock scheduler's {@code now()} (the blocking scheduler unless set), so a test can drive it with a
 * {@code VirtualTimeScheduler}. Cancelling interrupts the loop.
 *
 * <p>A wait is made from a {@link WaitSpec} ({@link #of(TransferEngine, WaitSpec)}), or from its mode and
 * timeout with the spec's defaults ({@link #failFast}, {@link #drain},
 * {@link #of(TransferEngine, FailMode, Duration)}). It uses the spec's mode, timeout, slice, scheduler (the
 * blocking one) and recorder; not its stall time: like vLLM's wait, it runs to its timeout. Instances are
 * immutable; {@link #slice}, {@link #scheduler}, {@link #clock} and {@link #recorder} return changed copies.
 */
public final class SlicedNativeWait implements WaitStrategy {
    private final TransferEngine engine;
    private final WaitSpec spec;
    private final Scheduler clock;

    private SlicedNativeWait(TransferEngine engine, WaitSpec spec, Scheduler clock) {
        this.engine = engine;
        this.spec = spec;
        this.clock = clock;
    }

    /**
     * A sliced wait that errors as soon as a status fails: the WRITE path ({@code fail_fast=True} in vLLM).
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static SlicedNativeWait failFast(TransferEngine engine, Duration transferTimeout) {
        return of(engine, WaitSpec.failFast(transferTimeout));
    }

    /**
     * A sliced wait that, after a failure, still waits until nothing is in flight: the READ barrier
     * ({@code fail_fast=False} in vLLM).
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static SlicedNativeWait drain(TransferEngine engine, Duration transferTimeout) {
        return of(engine, WaitSpec.drain(transferTimeout));
    }

    /**
     * A sliced native wait in the given mode.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static SlicedNativeWait of(TransferEngine engine, FailMode mode, Duration transferTimeout) {
        return of(engine, WaitSpec.of(mode, transferTimeout));
    }

    /**
     * A sliced native wait on {@code engine} with the settings of {@code spec} that apply (see the class comment).
     *
     * @throws IllegalArgumentException if the spec's slice is under 1 ms: {@code waitAll} takes whole milliseconds
     */
    public static SlicedNativeWait of(TransferEngine engine, WaitSpec spec) {
        Objects.requireNonNull(engine, "engine");
        checkNativeSlice(Objects.requireNonNull(spec, "spec").slice());
        return new SlicedNativeWait(engine, spec, null);
    }

    /**
     * This wait with another slice, the longest {@code waitAll} it makes.
     *
     * @throws IllegalArgumentException if {@code slice} is under 1 ms or longer than the timeout
     */
    public SlicedNativeWait slice(Duration slice) {
        Objects.requireNonNull(slice, "slice");
        checkNativeSlice(slice);
        return new SlicedNativeWait(engine, spec.slice(slice), clock);
    }

    /** This wait with its blocking loop on {@code scheduler}, which must allow blocking. */
    public SlicedNativeWait scheduler(Scheduler scheduler) {
        return new SlicedNativeWait(engine, spec.scheduler(scheduler), clock);
    }

    /** This wait with its deadline read on {@code clock}. */
    public SlicedNativeWait clock(Scheduler clock) {
        return new SlicedNativeWait(engine, spec, Objects.requireNonNull(clock, "clock"));
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under the strategy name
     * {@value WaitStrategy#SLICED_NATIVE}: one poll per {@code waitAll} call and one query per status check
     * between calls, every status in flight until the end, failed statuses queried once more at the end,
     * durations on the clock scheduler. {@link WaitRecorder#NOOP} (the default) turns recording off.
     */
    @Override
    public SlicedNativeWait recorder(WaitRecorder recorder) {
        return new SlicedNativeWait(engine, spec.recorder(recorder), clock);
    }

    /** Everything this wait waits with; its stall time, if set, is not used. */
    public WaitSpec spec() {
        return spec;
    }

    public FailMode mode() {
        return spec.mode();
    }

    public Duration slice() {
        return spec.slice();
    }

    /** {@value WaitStrategy#SLICED_NATIVE}. */
    @Override
    public String strategyName() {
        return SLICED_NATIVE;
    }

    /**
     * {@inheritDoc}
     *
     * <p>The {@code Mono} is named {@code kvflux.wait} and tagged {@code strategy=sliced-native} and
     * {@code fail_mode} ({@code fail_fast} or {@code drain}).
     */
    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
        return WaitRecording.named(WaitRecording.around(polls -> {
            TransferException broken = StatusChecks.nullStatus(snapshot);
            if (broken != null) {
                return Mono.error(broken);
            }
            Scheduler on = spec.schedulerOrBoundedElastic();
            Scheduler time = clock != null ? clock : on;
            return Mono.<Void>fromRunnable(() -> loop(snapshot, time, polls)).subscribeOn(on);
        }, spec.recorder(), SLICED_NATIVE, snapshot, this::deadlineClock), SLICED_NATIVE, spec.mode());
    }

    /** Where the deadline is read: the clock set, else the blocking scheduler (looked up by this call). */
    private Scheduler deadlineClock() {
        return clock != null ? clock : spec.schedulerOrBoundedElastic();
    }

    private void loop(TransferStatus[] statuses, Scheduler time, int[] polls) {
        FailMode mode = spec.mode();
        Duration transferTimeout = spec.transferTimeout();
        long deadline = time.now(TimeUnit.NANOSECONDS) + transferTimeout.toNanos();
        long sliceMs = NativeWait.ceilMillis(spec.slice());
        List<TransferStatus> inFlight = new ArrayList<>(List.of(statuses));
        while (true) {
            StatusCode result = StatusCode.SUCCESS;
            long remaining = deadline - time.now(TimeUnit.NANOSECONDS);
            if (remaining > 0 && !inFlight.isEmpty()) {
                long ms = Math.min(sliceMs, Math.max(1, TimeUnit.NANOSECONDS.toMillis(remaining + 999_999)));
                polls[0]++;
                result = NativeResults.waitAll(engine, inFlight, ms);
            }
            if (Thread.currentThread().isInterrupted()) {
                return;
            }
            int failed = -1;
            StatusCode failedCode = null;
            List<TransferStatus> still = new ArrayList<>(inFlight.size());
            for (int i = 0; i < statuses.length; i++) {
                StatusCode code = StatusChecks.code(statuses, i);
                if (code.isFailure()) {
                    if (failed < 0) {
                        failed = i;
                        failedCode = code;
                    }
                } else if (code != StatusCode.SUCCESS) {
                    still.add(statuses[i]);
                }
            }
            inFlight = still;
            if (failed >= 0 && (mode == FailMode.FAIL_FAST || still.isEmpty())) {
                throw StatusChecks.failed(statuses[failed], failedCode);
            }
            if (failed < 0 && still.isEmpty()) {
                return;
            }
            if (failed < 0 && result.isFailure()) {
                throw NativeResults.toException(result, statuses, transferTimeout);
            }
            if (time.now(TimeUnit.NANOSECONDS) >= deadline) {
                throw failed >= 0 ? StatusChecks.failed(statuses[failed], failedCode)
                        : TransferException.timedOut(transferTimeout);
            }
        }
    }

    @Override
    public String toString() {
        return "SlicedNativeWait[" + spec.mode() + ", timeout " + DurationText.of(spec.transferTimeout()) + ", slice "
                + DurationText.of(spec.slice()) + (spec.recording() ? ", recorded" : "") + "]";
    }

    /** Rejects a slice that {@code waitAll}, which takes whole milliseconds, cannot wait. */
    private static void checkNativeSlice(Duration slice) {
        if (slice.compareTo(Duration.ofMillis(1)) < 0) {
            throw new IllegalArgumentException("a native slice is whole milliseconds and at least 1ms, got "
                    + DurationText.of(slice) + "; the default is " + DurationText.of(WaitSpec.DEFAULT_SLICE));
        }
    }
}
