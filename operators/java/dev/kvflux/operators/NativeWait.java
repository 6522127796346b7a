package dev.kvflux.operators;

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

    private NativeWait(TransferEngine engine, Duration transferTimeout, Scheduler scheduler) {
        this.engine = engine;
        this.transferTimeout = transferTimeout;
        this.scheduler = scheduler;
    }

    /**
     * One {@code waitAll(statuses, transferTimeout)} on {@code engine}.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static NativeWait of(TransferEngine engine, Duration transferTimeout) {
        CompletionWait.checkTimeout(transferTimeout);
        return new NativeWait(Objects.requireNonNull(engine, "engine"), transferTimeout, null);
    }

    /** This wait with its blocking call on {@code scheduler}, which must allow blocking. */
    public NativeWait scheduler(Scheduler scheduler) {
        return new NativeWait(engine, transferTimeout, Objects.requireNonNull(scheduler, "scheduler"));
    }

    public Duration transferTimeout() {
        return transferTimeout;
    }

    @Override
    public String strategyName() {
        return "native";
    }

    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
        long timeoutMs = ceilMillis(transferTimeout);
        return Mono.defer(() -> {
                    TransferException broken = StatusChecks.nullStatus(snapshot);
                    if (broken != null) {
                        return Mono.error(broken);
                    }
                    return Mono.fromCallable(() -> NativeResults.waitAll(engine, List.of(snapshot), timeoutMs))
                            .subscribeOn(scheduler != null ? scheduler : Schedulers.boundedElastic());
                })
                .flatMap(code -> code == StatusCode.SUCCESS
                        ? Mono.<Void>empty()
                        : Mono.error(NativeResults.toException(code, snapshot, transferTimeout)));
    }

    @Override
    public String toString() {
        return "NativeWait[timeout " + transferTimeout + "]";
    }

    /** Whole milliseconds, rounded up, as vLLM's {@code ceil(timeout * 1000)}. */
    static long ceilMillis(Duration d) {
        long ms = d.toMillis();
        return d.minusMillis(ms).isZero() ? ms : ms + 1;
    }
}
