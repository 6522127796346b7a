package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The reference strategy {@code native}: one {@link TransferEngine#waitAll} with the whole transfer
 * timeout, as vLLM's MoRI-IO connector waited before it sliced its wait. On an xGMI engine a copy still running at the
 * call's first poll makes it cost the whole timeout.
 *
 * <p>{@link #await} runs the blocking call on its blocking scheduler ({@link Schedulers#boundedElastic()}
 * unless set, looked up at subscription), never on a non-blocking thread. It completes when
 * {@code waitAll} returns SUCCESS; otherwise it errors with a {@link TransferException}: IN_PROGRESS and
 * the message {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s}, or the returned failure code with the first failed status's message.
 * A status that breaks the {@link TransferStatus} contract (null in the list, or a {@code code()} that
 * throws or returns null, seen by the engine or by the wait) ends the wait with a {@link TransferException}
 * with code ERR_BAD_STATE and the thrown exception as its cause. Cancelling interrupts the blocking call. Each wait holds one thread of that scheduler for its whole
 * length; {@code boundedElastic} has at most ten threads per core, and waits beyond that queue.
 *
 * <p>A wait is made as every strategy is: from a {@link WaitSpec} ({@link #of(TransferEngine, WaitSpec)}), or
 * from a mode and a timeout ({@link #failFast}, {@link #drain}, {@link #of(TransferEngine, FailMode, Duration)})
 * or a timeout alone ({@link #of(TransferEngine, Duration)}), so that a configuration can pick the strategy and
 * the mode apart. Of the spec it uses the timeout, the scheduler (the blocking one) and the recorder. One native
 * call has no slice, no stall check and no fail mode of its own: MoRI's {@code WaitAll} waits the statuses in
 * order, keeps the first failure and stops at the first still in flight after its wait, whichever mode the spec
 * names. So the mode is kept in {@link #spec()} and changes nothing, and the publisher is tagged
 * {@code fail_mode=none}. Every factory refuses a transfer timeout that is zero, negative or over 24 hours with
 * an {@link IllegalArgumentException}. Instances are immutable; {@link #scheduler} and {@link #recorder} return
 * changed copies.
 */
public final class NativeWait implements WaitStrategy {
    private final TransferEngine engine;
    private final WaitSpec spec;

    private NativeWait(TransferEngine engine, WaitSpec spec) {
        this.engine = engine;
        this.spec = spec;
    }

    /**
     * One {@code waitAll(statuses, transferTimeout)} on {@code engine}.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static NativeWait of(TransferEngine engine, Duration transferTimeout) {
        return drain(engine, transferTimeout);
    }

    /** {@link #of(TransferEngine, Duration)} with a fail-fast spec, which waits the same (see the class comment). */
    public static NativeWait failFast(TransferEngine engine, Duration transferTimeout) {
        return of(engine, FailMode.FAIL_FAST, transferTimeout);
    }

    /** {@link #of(TransferEngine, Duration)} with a draining spec, which waits the same (see the class comment). */
    public static NativeWait drain(TransferEngine engine, Duration transferTimeout) {
        return of(engine, FailMode.DRAIN, transferTimeout);
    }

    /** {@link #of(TransferEngine, Duration)} with {@code mode} kept in its spec, where it changes nothing. */
    public static NativeWait of(TransferEngine engine, FailMode mode, Duration transferTimeout) {
        return of(engine, WaitSpec.of(mode, transferTimeout));
    }

    /** One {@code waitAll} on {@code engine} with the settings of {@code spec} that apply (see the class comment). */
    public static NativeWait of(TransferEngine engine, WaitSpec spec) {
        return new NativeWait(Objects.requireNonNull(engine, "engine"), Objects.requireNonNull(spec, "spec"));
    }

    /** This wait with its blocking call on {@code scheduler}, which must allow blocking. */
    public NativeWait scheduler(Scheduler scheduler) {
        return new NativeWait(engine, spec.scheduler(scheduler));
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under the strategy name
     * {@value WaitStrategy#NATIVE}: one poll (the {@code waitAll} call), every status in flight until it
     * returns, failed statuses queried once more at the end, durations on the blocking scheduler's clock.
     * {@link WaitRecorder#NOOP} (the default) turns recording off.
     */
    @Override
    public NativeWait recorder(WaitRecorder recorder) {
        return new NativeWait(engine, spec.recorder(recorder));
    }

    /** Everything this wait waits with; its mode, slice and stall time change nothing (see the class comment). */
    public WaitSpec spec() {
        return spec;
    }

    public Duration transferTimeout() {
        return spec.transferTimeout();
    }

    /** {@value WaitStrategy#NATIVE}. */
    @Override
    public String strategyName() {
        return NATIVE;
    }

    /**
     * {@inheritDoc}
     *
     * <p>The {@code Mono} is named {@code kvflux.wait} and tagged {@code strategy=native} and
     * {@code fail_mode=none}.
     */
    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
        Duration transferTimeout = spec.transferTimeout();
        long timeoutMs = ceilMillis(transferTimeout);
        return WaitRecording.named(WaitRecording.around(polls -> {
                    TransferException broken = StatusChecks.nullStatus(snapshot);
                    if (broken != null) {
                        return Mono.error(broken);
                    }
                    return Mono.fromCallable(() -> {
                                polls[0]++;
                                return NativeResults.waitAll(engine, List.of(snapshot), timeoutMs);
                            })
                            .subscribeOn(spec.schedulerOrBoundedElastic())
                            .flatMap(code -> code == StatusCode.SUCCESS
                                    ? Mono.<Void>empty()
                                    : Mono.error(NativeResults.toException(code, snapshot, transferTimeout)));
                }, spec.recorder(), NATIVE, snapshot, spec::schedulerOrBoundedElastic), NATIVE, null);
    }

    @Override
    public String toString() {
        return "NativeWait[timeout " + DurationText.of(spec.transferTimeout()) + (spec.recording() ? ", recorded" : "")
                + "]";
    }

    /** Whole milliseconds, rounded up, as vLLM's {@code ceil(timeout * 1000)}. */
    static long ceilMillis(Duration d) {
        long ms = d.toMillis();
        return d.minusMillis(ms).isZero() ? ms : ms + 1;
    }
}
