package dev.kvflux.operators;

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
 * The completion wait for backends that push completion ({@code reactive-push}): a {@link PushedStatus} that says it
 * has settled ({@link PushedStatus#settledCode}) is counted at once; each other one that takes a listener
 * ({@link PushedStatus#onPushed}) is listened to without a query (the listener is told at once if the status has
 * settled); every other status is queried once at subscription (those already done need no push),
 * then each {@link PushedStatus} still in flight is awaited through its {@link PushedStatus#pushed()} publisher. So
 * the wait ends as soon as the backend announces the last copy, with no poll loop and no slice. Statuses that do not
 * push are polled together, once per slice, as {@link CompletionWait} does.
 *
 * <p>One look at subscription: the pushed statuses still in flight are queried once each, from the last in the list
 * backwards, stopping at the first still in flight. A wait usually begins as the request's last copies end, before
 * the backend has pushed them; the look then ends it at once, on the subscriber's thread, rather than a push and a
 * thread wake-up or two later. It costs a query per status it settles plus at most one.
 *
 * <h2>What {@link #await} emits</h2>
 * <ul>
 *   <li>All statuses SUCCESS: completes once the last one is pushed.</li>
 *   <li>A status fails: with {@link #failFast} errors at once with a {@link TransferException}
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
 * there. Requests whose pushes end them while an earlier one still waits for the scheduler join that one's task,
 * and are signalled one after another, in the order they ended, on one scheduler thread: a subscriber with long work
 * after the wait delays the others of its batch, and should move it to a scheduler of its own ({@code publishOn}).
 * So the backend's notification thread, on GPUs one thread shared by every push of the process, runs no subscriber's
 * work (unless the scheduler refuses the task, or is shut down or has not run it within 100 ms: then the thread
 * that hands the next request over signals the batch); it pays one compare-and-set per request and one task per
 * batch, not one per status. The timeout,
 * the stall check and the polling of statuses that do not push run on the scheduler too. Statuses all done (or one
 * failed) at subscription signal at once, on the subscriber's thread. Cancelling, or the wait ending,
 * cancels every per-status subscription, the poll and the timeout.
 *
 * <p>A wait is made from a {@link WaitSpec} ({@link #of(WaitSpec)}), or from its mode and timeout with the
 * spec's defaults ({@link #failFast}, {@link #drain}, {@link #of(FailMode, Duration)}); it uses every setting
 * of the spec, the slice for the statuses that do not push. Instances are immutable; {@link #slice},
 * {@link #scheduler}, {@link #stallAfter} and {@link #recorder} return changed copies, checked as
 * {@link WaitSpec}'s withers check them.
 */
public final class PushWait implements WaitStrategy {
    private final WaitSpec spec;
    private final boolean signalOnPush;
    /**
     * Disposes the timers of waits that ended on the pushing thread (with {@link #signalOnPush}): there when they end
     * sparsely, else in batches on the scheduler.
     */
    private final TimerReaper reaper;
    /** The clock {@link #reaper} times its batches on: {@link System#nanoTime()} but in tests. */
    private final java.util.function.LongSupplier reaperClock;
    /** Hands the waits that pushes end to the scheduler, those that end together in one task. */
    private final SignalBatcher batcher;

    private PushWait(WaitSpec spec) {
        this(spec, false, System::nanoTime);
    }

    private PushWait(WaitSpec spec, boolean signalOnPush, java.util.function.LongSupplier reaperClock) {
        this.spec = spec;
        this.signalOnPush = signalOnPush;
        this.reaperClock = reaperClock;
        this.reaper = new TimerReaper(reaperClock);
        this.batcher = new SignalBatcher(reaperClock);
    }

    /** Tests: this wait, its timer disposal timed on {@code clock} (nanoseconds) instead of {@link System#nanoTime()}. */
    PushWait reaperClock(java.util.function.LongSupplier clock) {
        return new PushWait(spec, signalOnPush, clock);
    }

    /**
     * A push wait that errors as soon as a status fails (the WRITE path), with {@link WaitSpec#failFast}'s
     * defaults.
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static PushWait failFast(Duration transferTimeout) {
        return of(WaitSpec.failFast(transferTimeout));
    }

    /**
     * A push wait that, after a failure, still waits until every status has settled (the READ barrier), with
     * {@link WaitSpec#drain}'s defaults.
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static PushWait drain(Duration transferTimeout) {
        return of(WaitSpec.drain(transferTimeout));
    }

    /**
     * A push wait in the given mode, with {@link WaitSpec#of(FailMode, Duration)}'s defaults.
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static PushWait of(FailMode mode, Duration transferTimeout) {
        return of(WaitSpec.of(mode, transferTimeout));
    }

    /** A push wait with every setting of {@code spec}. */
    public static PushWait of(WaitSpec spec) {
        return new PushWait(Objects.requireNonNull(spec, "spec"));
    }

    /**
     * This wait with another slice: how often the statuses that do not push are queried (pushed statuses are
     * not polled at all).
     *
     * @throws IllegalArgumentException if {@code slice} is not positive, is longer than the timeout, or is
     *     longer than the stall time set
     */
    public PushWait slice(Duration slice) {
        return new PushWait(spec.slice(slice), signalOnPush, reaperClock);
    }

    /** This wait with its signals, its timeout and the polling of statuses that do not push on {@code scheduler}. */
    public PushWait scheduler(Scheduler scheduler) {
        return new PushWait(spec.scheduler(scheduler), signalOnPush, reaperClock);
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under the strategy name
     * {@value WaitStrategy#REACTIVE_PUSH} ({@value WaitStrategy#REACTIVE_PUSH_DIRECT} with {@link #signalOnPush()});
     * {@link WaitRecorder#NOOP} (the default) turns recording off. A push
     * reports its status leaving flight (and the detection lag, when it is the last) on the backend's
     * notification thread; everything else is reported on the scheduler or at subscription.
     */
    @Override
    public PushWait recorder(WaitRecorder recorder) {
        return new PushWait(spec.recorder(recorder), signalOnPush, reaperClock);
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
        return new PushWait(spec.stallAfter(stallAfter), signalOnPush, reaperClock);
    }

    /**
     * This wait, signalling its end on the thread of the push that ended it (the backend's notification thread)
     * instead of handing it to the scheduler: one thread wake-up less between the copies' end and the subscriber,
     * at the price of the subscriber's work running on a thread that every push of the process shares, so that a
     * slow subscriber delays every other request's push. Use it where what follows the wait is short (sending a
     * message, completing a future) or moves to a scheduler of its own ({@code publishOn}). Ends that are not a
     * push (the timeout, a stall, polled statuses) still signal on the scheduler. Off by default.
     */
    public PushWait signalOnPush() {
        return new PushWait(spec, true, reaperClock);
    }

    /** Whether this wait signals on the thread of the push that ended it ({@link #signalOnPush()}). */
    public boolean signalsOnPush() {
        return signalOnPush;
    }

    /** Everything this wait waits with. */
    public WaitSpec spec() {
        return spec;
    }

    public FailMode mode() {
        return spec.mode();
    }

    public Duration transferTimeout() {
        return spec.transferTimeout();
    }

    public Duration slice() {
        return spec.slice();
    }

    /** {@value WaitStrategy#REACTIVE_PUSH}, or {@value WaitStrategy#REACTIVE_PUSH_DIRECT} with {@link #signalOnPush()}. */
    @Override
    public String strategyName() {
        return signalOnPush ? REACTIVE_PUSH_DIRECT : REACTIVE_PUSH;
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
                WaitRecording.rejected(spec.recorder(), strategyName(), snapshot.length);
                return Mono.error(broken);
            }
            Scheduler on = spec.schedulerOrParallel();
            return Mono.create(sink -> new PushBarrier(snapshot, spec, on, signalOnPush, reaper, batcher, sink,
                    strategyName()).start());
        }), strategyName(), spec.mode());
    }

    @Override
    public String toString() {
        return "PushWait[" + spec.describe() + (signalOnPush ? ", signal on push" : "") + "]";
    }
}
