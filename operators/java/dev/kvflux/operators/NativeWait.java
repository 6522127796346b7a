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
 */
public final class NativeWait implements WaitStrategy {
    private final TransferEngine engine;
    private final Duration transferTimeout;
    private final Scheduler scheduler;
    private final WaitRecorder recorder;

    private NativeWait(TransferEngine engine, Duration transferTimeout, Scheduler scheduler, WaitRecorder recorder) {
        this.engine = engine;
        this.transferTimeout = transferTimeout;
        this.scheduler = scheduler;
        this.recorder = recorder;
    }

    /**
     * One {@code waitAll(statuses, transferTimeout)} on {@code engine}.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static NativeWait of(TransferEngine engine, Duration transferTimeout) {
        CompletionWait.checkTimeout(transferTimeout);
        return new NativeWait(Objects.requireNonNull(engine, "engine"), transferTimeout, null, WaitRecorder.NOOP);
    }

    /** This wait with its blocking call on {@code scheduler}, which must allow blocking. */
    public NativeWait scheduler(Scheduler scheduler) {
        return new NativeWait(engine, transferTimeout, Objects.requireNonNull(scheduler, "scheduler"), recorder);
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under the strategy name {@code native}:
     * one poll (the {@code waitAll} call), every status in flight until it returns, failed statuses queried
     * once more at the end, durations on the blocking scheduler's clock. {@link WaitRecorder#NOOP} (the
     * default) turns recording off.
     */
    @Override
    public NativeWait recorder(WaitRecorder recorder) {
        return new NativeWait(engine, transferTimeout, scheduler, WaitRecording.safe(recorder));
    }

    public Duration transferTimeout() {
        return transferTimeout;
    }

    @Override
    public String strategyName() {
        return "native";
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
                            .subscribeOn(blocking())
                            .flatMap(code -> code == StatusCode.SUCCESS
                                    ? Mono.<Void>empty()
                                    : Mono.error(NativeResults.toException(code, snapshot, transferTimeout)));
                }, recorder, strategyName(), snapshot, this::blocking), strategyName(), null);
    }

    @Override
    public Mono<Void> awaitAll(org.reactivestreams.Publisher<? extends TransferStatus> statuses) {
        return WaitRecording.named(WaitStrategy.super.awaitAll(statuses), strategyName(), null);
    }

    private Scheduler blocking() {
        return scheduler != null ? scheduler : Schedulers.boundedElastic();
    }

    @Override
    public String toString() {
        return "NativeWait[timeout " + DurationText.of(transferTimeout) + (recorder != WaitRecorder.NOOP ? ", recorded" : "") + "]";
    }

    /** Whole milliseconds, rounded up, as vLLM's {@code ceil(timeout * 1000)}. */
    static long ceilMillis(Duration d) {
        long ms = d.toMillis();
        return d.minusMillis(ms).isZero() ? ms : ms + 1;
    }
}
