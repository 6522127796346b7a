package dev.kvflux.operators;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The completion wait for backends that push completion ({@code reactive-push}): every status is queried
 * once at subscription (those already done need no push), then each {@link PushedStatus} still in flight
 * is awaited through its {@link PushedStatus#pushed()} publisher, so the wait ends as soon as the backend
 * announces the last copy, with no poll loop and no slice. Statuses that do not push are polled together,
 * once per slice, as {@link CompletionWait} does.
 *
 * <h2>What {@link #await} emits</h2>
 * <ul>
 *   <li>All statuses SUCCESS: completes once the last one is pushed.</li>
 *   <li>A status fails: with {@link #of} / {@link #failFast} errors at once with a {@link TransferException}
 *       of kind {@link TransferException.Kind#FAILED} carrying its code and message; with {@link #drain}
 *       errors once every status has settled, and not before. When several failed, the earliest in the list among those seen wins.</li>
 *   <li>Still in flight at {@code transferTimeout}: one last query of every status not yet settled, then
 *       a {@link TransferException} of kind {@link TransferException.Kind#TIMED_OUT} with code IN_PROGRESS
 *       and the message {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out
 *       after 30s}, unless that query finds them all done or one failed.</li>
 *   <li>Only with {@link #stallAfter}: no status has settled for that long while some are still in
 *       flight: one last query of every status not yet settled, then a {@link TransferException} of kind
 *       {@link TransferException.Kind#STALLED} with code IN_PROGRESS whose reason says the transfer
 *       stalled, {@code stallAfter} after the last status settled (or after subscription, if none has).
 *       With {@link #drain}, a failure already seen is reported instead. A transfer whose statuses keep
 *       settling, however slowly, runs on to the transfer timeout.</li>
 *   <li>A status that breaks the {@link TransferStatus} contract (the list holds null, a {@code code()}
 *       throws or returns null, or a {@code pushed()} publisher errors): a {@link TransferException} with
 *       code {@link StatusCode#ERR_BAD_STATE} and the thrown exception as its cause, at once, in either
 *       mode.</li>
 * </ul>
 * <p>{@link #awaitAll} takes the statuses from a {@code Publisher} instead of a list
 * ({@code statuses.as(wait::awaitAll)}) and waits as above once it completes.
 *
 * <h2>On which thread, and at what cost</h2>
 * A push only counts: it marks its status settled and decrements the request's count of statuses in
 * flight (atomics, no allocation, no lock). The request is handed to the wait's {@link Scheduler}
 * ({@link Schedulers#parallel()} unless set, looked up at subscription) once, when its last status
 * settles or (fail-fast) one fails, and every signal that does not happen during subscription arrives
 * there. So the backend's notification thread, on GPUs one thread shared by every push of the process,
 * never runs a subscriber's work and pays one task hand-off per request, not one per status. The timeout,
 * the stall check and the polling of statuses that do not push run on the scheduler too. Statuses all done (or one
 * failed) at subscription signal at once, on the subscriber's thread. Cancelling, or the wait ending,
 * cancels every per-status subscription, the poll and the timeout.
 */
public final class PushWait implements WaitStrategy {
    private final FailMode mode;
    private final Duration transferTimeout;
    private final Duration slice;
    private final Duration stallAfter;
    private final Scheduler scheduler;
    private final WaitRecorder recorder;

    private PushWait(FailMode mode, Duration transferTimeout, Duration slice, Duration stallAfter,
                     Scheduler scheduler, WaitRecorder recorder) {
        this.mode = mode;
        this.transferTimeout = transferTimeout;
        this.slice = slice;
        this.stallAfter = stallAfter;
        this.scheduler = scheduler;
        this.recorder = recorder;
    }

    /**
     * A fail-fast push wait bounded by {@code transferTimeout} (the WRITE path).
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static PushWait of(Duration transferTimeout) {
        return failFast(transferTimeout);
    }

    /** A push wait that errors as soon as a status fails (the WRITE path). */
    public static PushWait failFast(Duration transferTimeout) {
        CompletionWait.checkTimeout(transferTimeout);
        return new PushWait(FailMode.FAIL_FAST, transferTimeout, CompletionWait.DEFAULT_SLICE, null, null, WaitRecorder.NOOP);
    }

    /** A push wait that, after a failure, still waits until every status has settled (the READ barrier). */
    public static PushWait drain(Duration transferTimeout) {
        CompletionWait.checkTimeout(transferTimeout);
        return new PushWait(FailMode.DRAIN, transferTimeout, CompletionWait.DEFAULT_SLICE, null, null, WaitRecorder.NOOP);
    }

    /** This wait with its signals, its timeout and the polling of statuses that do not push on {@code scheduler}. */
    public PushWait scheduler(Scheduler scheduler) {
        return new PushWait(mode, transferTimeout, slice, stallAfter, Objects.requireNonNull(scheduler, "scheduler"),
                recorder);
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under the strategy name
     * {@code reactive-push}; {@link WaitRecorder#NOOP} (the default) turns recording off. A push reports its
     * status leaving flight (and the detection lag, when it is the last) on the backend's notification
     * thread; everything else is reported on the scheduler or at subscription.
     */
    @Override
    public PushWait recorder(WaitRecorder recorder) {
        return new PushWait(mode, transferTimeout, slice, stallAfter, scheduler, WaitRecording.safe(recorder));
    }

    /**
     * This wait, failing early when the transfer stalls: when no status has settled (pushed, or seen
     * settled by a query) for {@code stallAfter} while some are still in flight. As with
     * {@link CompletionWait#stallAfter}, a stall is told apart from slowness by progress, not by total time:
     * a transfer whose statuses keep settling runs on to the transfer timeout. Off by default.
     *
     * @throws IllegalArgumentException if {@code stallAfter} is shorter than the slice or longer than the
     *     transfer timeout
     */
    public PushWait stallAfter(Duration stallAfter) {
        CompletionWait.checkStallAfter(stallAfter, slice, transferTimeout);
        return new PushWait(mode, transferTimeout, slice, stallAfter, scheduler, recorder);
    }

    public FailMode mode() {
        return mode;
    }

    public Duration transferTimeout() {
        return transferTimeout;
    }

    @Override
    public String strategyName() {
        return "reactive-push";
    }

    /**
     * {@inheritDoc}
     *
     * <p>The {@code Mono} is named {@code kvflux.wait} and tagged {@code strategy=reactive-push} and
     * {@code fail_mode} ({@code fail_fast} or {@code drain}).
     */
    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
        return WaitRecording.named(Mono.defer(() -> {
            TransferException broken = StatusChecks.nullStatus(snapshot);
            if (broken != null) {
                WaitRecording.rejected(recorder, strategyName(), snapshot.length);
                return Mono.error(broken);
            }
            Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
            return Mono.create(sink -> new PushBarrier(snapshot, mode, transferTimeout, slice, stallAfter, on, sink,
                    recorder, strategyName()).start());
        }), strategyName(), mode);
    }

    @Override
    public Mono<Void> awaitAll(org.reactivestreams.Publisher<? extends TransferStatus> statuses) {
        return WaitRecording.named(WaitStrategy.super.awaitAll(statuses), strategyName(), mode);
    }

    @Override
    public String toString() {
        return "PushWait[" + mode + ", timeout " + DurationText.of(transferTimeout)
                + (stallAfter != null ? ", stall after " + DurationText.of(stallAfter) : "")
                + (recorder != WaitRecorder.NOOP ? ", recorded" : "") + "]";
    }
}
