package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The completion wait: polls a request's transfer statuses every slice (10 ms by default) until all of
 * them succeed, one fails, or the transfer timeout passes, and never blocks a thread while it waits.
 *
 * <p>This replaces one native {@code waitAll(statuses, transferTimeout)}. On MoRI's xGMI backend a status
 * completes only when something queries it, and a bounded native wait queries once and then sleeps to
 * its deadline, so every wait whose copies were still running at that query cost the whole timeout.
 * Here the statuses are queried at subscription and then once per slice, so the wait ends within one
 * slice of the last copy.
 *
 * <h2>What {@link #await} emits</h2>
 * <ul>
 *   <li>An empty list, or statuses that are all SUCCESS at subscription: completes at once, without
 *       waiting a slice.</li>
 *   <li>All statuses SUCCESS: completes at the first slice that sees it.</li>
 *   <li>A status fails: with {@link #failFast} errors at the slice that sees it; with {@link #drain}
 *       errors once no status is in flight any more, and not before. The error is a
 *       {@link TransferException} of kind {@link TransferException.Kind#FAILED} with the failed status's
 *       code and message; when several failed, the
 *       earliest in the list wins, and a failure always wins over a timeout.</li>
 *   <li>Statuses still in flight (INIT or IN_PROGRESS) at {@code transferTimeout} after subscription:
 *       one last query, then a {@link TransferException} of kind {@link TransferException.Kind#TIMED_OUT}
 *       with code IN_PROGRESS and the message
 *       {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA transfer timed out after 30s}.</li>
 *   <li>Only with {@link #stallAfter}: no status has left flight for that long while some are still in
 *       flight: a {@link TransferException} of kind {@link TransferException.Kind#STALLED} with code
 *       IN_PROGRESS whose reason says the transfer stalled, at the first slice that sees it. A transfer that keeps
 *       completing statuses, however slowly, runs on to the transfer timeout.</li>
 *   <li>A status that breaks the {@link TransferStatus} contract (the list holds null, or a
 *       {@code code()} throws or returns null): a {@link TransferException} with code
 *       {@link StatusCode#ERR_BAD_STATE} and the thrown exception as its cause, at the query that sees it,
 *       in either mode (a status that cannot be queried can never be drained).</li>
 * </ul>
 * Only statuses still in flight are queried, kept in a compacting array of indexes; a tick allocates
 * nothing of the wait's own. Cancelling the {@code Mono} stops all polling. Queries run
 * on the wait's {@link Scheduler} ({@link Schedulers#parallel()} unless set, looked up at subscription so
 * that {@code StepVerifier.withVirtualTime} drives it); {@link TransferStatus#code()} never blocks.
 *
 * <p>{@link #awaitAll} takes the statuses from a {@code Publisher} instead of a list
 * ({@code statuses.as(wait::awaitAll)}) and waits as above once it completes.
 *
 * <p>Its {@code Mono} is named {@code kvflux.wait} and tagged with the strategy and fail mode, and
 * {@link #recorder} reports every wait to a {@link WaitRecorder} (none by default), for metrics.
 *
 * <p>A wait is made from a {@link WaitSpec} ({@link #of(WaitSpec)}), or from its mode and timeout with the
 * spec's defaults ({@link #failFast}, {@link #drain}, {@link #of(FailMode, Duration)}); it uses every setting
 * of the spec. Instances are immutable; {@link #slice}, {@link #scheduler}, {@link #stallAfter},
 * {@link #sharedPoll()}, {@link #adaptive(CopyRate)} and {@link #recorder} return changed copies, checked as
 * {@link WaitSpec}'s withers check them.
 *
 * <p>With {@link #adaptive(CopyRate)} the wait polls densely around the predicted end of the copies instead of
 * every slice throughout, for engines that cannot push completion: it ends within a twentieth of a slice of the
 * last copy when the prediction holds, for a few dozen more queries per wait.
 */
public final class CompletionWait implements WaitStrategy {
    private final WaitSpec spec;
    private final boolean shared;
    /** The adaptive poll's rate; null when the wait polls every slice. */
    private final CopyRate adaptive;

    private CompletionWait(WaitSpec spec, boolean shared, CopyRate adaptive) {
        this.spec = spec;
        this.shared = shared;
        this.adaptive = adaptive;
    }

    /**
     * A wait that errors as soon as a status fails (the WRITE path), with {@link WaitSpec#failFast}'s defaults.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static CompletionWait failFast(Duration transferTimeout) {
        return of(WaitSpec.failFast(transferTimeout));
    }

    /**
     * A wait that, after a failure, still waits until nothing is in flight (the READ barrier), with
     * {@link WaitSpec#drain}'s defaults.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static CompletionWait drain(Duration transferTimeout) {
        return of(WaitSpec.drain(transferTimeout));
    }

    /**
     * A wait in the given mode, with {@link WaitSpec#of(FailMode, Duration)}'s defaults.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static CompletionWait of(FailMode mode, Duration transferTimeout) {
        return of(WaitSpec.of(mode, transferTimeout));
    }

    /** A wait with every setting of {@code spec}, polled by an interval of its own. */
    public static CompletionWait of(WaitSpec spec) {
        return new CompletionWait(Objects.requireNonNull(spec, "spec"), false, null);
    }

    /**
     * This wait with another slice.
     *
     * @throws IllegalArgumentException if {@code slice} is not positive, is longer than the timeout, or is
     *     longer than the stall time set
     */
    public CompletionWait slice(Duration slice) {
        return new CompletionWait(spec.slice(slice), shared, adaptive);
    }

    /**
     * This wait, failing early when the transfer stalls: when no status has left flight for
     * {@code stallAfter} while some are still in flight. A stall is told apart from slowness by progress,
     * not by total time: a transfer whose statuses keep completing runs on to the transfer timeout. Off by
     * default.
     *
     * @throws IllegalArgumentException if {@code stallAfter} is shorter than the slice or longer than the
     *     transfer timeout
     */
    public CompletionWait stallAfter(Duration stallAfter) {
        return new CompletionWait(spec.stallAfter(stallAfter), shared, adaptive);
    }

    /** This wait with its queries and its timer on {@code scheduler}. */
    public CompletionWait scheduler(Scheduler scheduler) {
        return new CompletionWait(spec.scheduler(scheduler), shared, adaptive);
    }

    /**
     * This wait, polled by the shared poll driver instead of an interval of its own: one loop per core
     * (per scheduler and slice) ticks every slice and polls every request registered with it, so a
     * waiting request costs its status queries and no timer task per tick. Same emissions, same bounds:
     * the first poll at subscription, then one per slice (aligned to the loop's ticks rather than to the
     * subscription), the timeout, the stall check and cancellation as above; signals arrive on the
     * scheduler's threads. It reports as {@value WaitStrategy#REACTIVE_SHARED}. Off by default.
     */
    public CompletionWait sharedPoll() {
        return new CompletionWait(spec, true, null);
    }

    /**
     * This wait, polling densely near the predicted end of the copies and every slice otherwise (opt-in, for
     * engines that cannot push completion): at subscription it sums the {@linkplain TransferStatus#bytes() bytes}
     * of the statuses still in flight and predicts their end from {@code rate}; it then polls every slice until a
     * sixteenth of the predicted time (at least 1 ms) before that end, every twentieth of a slice (at least
     * 0.1 ms; 0.5 ms at the default slice) until as long after it, and every slice again after that. A wait that
     * ends with every status done teaches {@code rate} what it saw. Same emissions, timeout, stall check and
     * scheduler as the polled wait; where a status does not tell its bytes, or {@code rate} knows nothing yet, it
     * polls every slice. It reports as {@value WaitStrategy#REACTIVE_ADAPTIVE}. Replaces {@link #sharedPoll()}.
     *
     * <p>Share one {@code rate} among the waits over one engine's statuses; the waits of one instance share it.
     */
    public CompletionWait adaptive(CopyRate rate) {
        return new CompletionWait(spec, false, Objects.requireNonNull(rate, "rate"));
    }

    /** The adaptive poll ({@link #adaptive(CopyRate)}) with a rate of its own, learnt from its waits. */
    public CompletionWait adaptive() {
        return adaptive(CopyRate.learned());
    }

    /** The adaptive poll's rate, if this wait is adaptive. */
    public java.util.Optional<CopyRate> copyRate() {
        return java.util.Optional.ofNullable(adaptive);
    }

    /**
     * This wait, reporting each subscription to {@code recorder} under its {@linkplain #strategyName() name};
     * {@link WaitRecorder#NOOP} (the default) turns recording off. Polls and queries are counted in the wait's
     * own fields and reported at its end; a poll that sees statuses settle reports them leaving flight;
     * nothing is allocated per poll.
     */
    @Override
    public CompletionWait recorder(WaitRecorder recorder) {
        return new CompletionWait(spec.recorder(recorder), shared, adaptive);
    }

    /** Everything this wait waits with. */
    public WaitSpec spec() {
        return spec;
    }

    /** Whether this wait is polled by the shared poll driver ({@link #sharedPoll()}). */
    public boolean isSharedPoll() {
        return shared;
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

    /** {@value WaitStrategy#REACTIVE}, or {@value WaitStrategy#REACTIVE_SHARED} with {@link #sharedPoll()}. */
    @Override
    public String strategyName() {
        return adaptive != null ? REACTIVE_ADAPTIVE : shared ? REACTIVE_SHARED : REACTIVE;
    }

    /**
     * {@inheritDoc}
     *
     * <p>The {@code Mono} is named {@code kvflux.wait} and tagged {@code strategy} ({@code reactive} or
     * {@code reactive-shared}) and {@code fail_mode} ({@code fail_fast} or {@code drain}), so that
     * {@code tap(Micrometer.metrics(registry))} names its meters after the wait.
     */
    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
        String name = strategyName();
        WaitRecorder recorder = spec.recorder();
        Duration slice = spec.slice();
        Duration transferTimeout = spec.transferTimeout();
        return WaitRecording.named(Mono.defer(() -> {
            TransferException broken = StatusChecks.nullStatus(snapshot);
            if (broken != null) {
                WaitRecording.rejected(recorder, name, snapshot.length);
                return Mono.error(broken);
            }
            Scheduler on = spec.schedulerOrParallel();
            Tracker tracker = new Tracker(snapshot, spec, on, name);
            if (tracker.poll()) {
                return tracker.signal();
            }
            Mono<Void> waiting;
            if (shared) {
                waiting = Mono.<Void>create(sink -> {
                            sink.onCancel(tracker::cancel);
                            tracker.attach(sink);
                            PollDriver.of(on, slice.toNanos()).register(tracker);
                        })
                        .timeout(transferTimeout,
                                Mono.fromRunnable(tracker::pollAtDeadline).then(Mono.defer(tracker::signal)), on);
            } else {
                Flux<Long> ticks;
                if (adaptive != null) {
                    long bytes = tracker.bytesInFlight();
                    AdaptiveSchedule schedule = AdaptiveSchedule.around(slice, adaptive.predictNanos(bytes));
                    ticks = schedule.ticks(on).filter(tick -> {
                        boolean settled = tracker.test(tick);
                        if (settled && tracker.succeeded()) {
                            adaptive.observe(bytes, schedule.endedAfterNanos());
                        }
                        return settled;
                    });
                } else {
                    ticks = Flux.interval(slice, slice, on).filter(tracker);
                }
                waiting = ticks
                        .next()
                        .then()
                        .timeout(transferTimeout, Mono.fromRunnable(tracker::pollAtDeadline), on)
                        .then(Mono.defer(tracker::signal));
            }
            return recorder == WaitRecorder.NOOP ? waiting : waiting.doOnCancel(tracker::cancelled);
        }), name, spec.mode());
    }

    @Override
    public String toString() {
        return "CompletionWait[" + spec.describe() + (shared ? ", shared poll" : "")
                + (adaptive != null ? ", adaptive" : "") + "]";
    }

    /**
     * The statuses still in flight and the first failure seen. Polled from the interval's worker and,
     * once, from the timeout's timer, which may overlap a late tick: hence synchronized. What it reports is
     * counted in its {@link WaitTally}, and its stall time kept on a {@link StallClock} (null when off), both
     * under this monitor.
     */
    private static final class Tracker implements Predicate<Long>, PollDriver.Polled {
        private final TransferStatus[] statuses;
        private final FailMode mode;
        private final Duration transferTimeout;
        private final Scheduler clock;
        private final StallClock stall;
        private final WaitTally tally;
        private final int[] inFlight;
        private int inFlightCount;
        private int failedIndex = -1;
        private StatusCode failedCode;
        private String failedMessage;
        private boolean settled;
        private TransferException verdict;
        /** Where a shared poll signals; null for the per-request interval. */
        private MonoSink<Void> sink;
        private volatile boolean gone;

        Tracker(TransferStatus[] statuses, WaitSpec spec, Scheduler clock, String name) {
            this.tally = new WaitTally(spec.recorder(), name, clock);
            tally.started(statuses.length);
            this.statuses = statuses;
            this.mode = spec.mode();
            this.transferTimeout = spec.transferTimeout();
            this.clock = clock;
            this.stall = spec.stallAfter() != null
                    ? new StallClock(spec.stallAfter(), clock.now(TimeUnit.NANOSECONDS)) : null;
            this.inFlight = new int[statuses.length];
            for (int i = 0; i < statuses.length; i++) {
                inFlight[i] = i;
            }
            this.inFlightCount = statuses.length;
        }

        synchronized void attach(MonoSink<Void> sink) {
            this.sink = sink;
        }

        void cancel() {
            gone = true;
        }

        @Override
        public boolean gone() {
            return gone;
        }

        /** A tick of the shared poll driver: polls, and once settled signals the subscriber (once). */
        @Override
        public boolean pollFromDriver() {
            MonoSink<Void> target;
            TransferException error;
            synchronized (this) {
                if (!poll() || gone) {
                    return gone;
                }
                gone = true;
                target = sink;
                error = verdict;
                tally.ended(WaitOutcome.of(error), inFlightCount);
            }
            if (error != null) {
                target.error(error);
            } else {
                target.success();
            }
            return true;
        }

        /** One tick of the interval: polls; the tick passes once the wait is settled. */
        @Override
        public boolean test(Long tick) {
            return poll();
        }

        /**
         * Queries every status still in flight, compacting the in-flight indexes in place (no allocation);
         * returns whether the wait is settled. A status that breaks the contract settles it at once with
         * ERR_BAD_STATE, in either mode: it can no longer be told apart from a finished one.
         */
        synchronized boolean poll() {
            if (settled) {
                return true;
            }
            tally.polled(inFlightCount);
            int kept = 0;
            for (int i = 0; i < inFlightCount; i++) {
                int index = inFlight[i];
                StatusCode code;
                try {
                    code = StatusChecks.code(statuses, index);
                } catch (TransferException broken) {
                    tally.failed(StatusCode.ERR_BAD_STATE);
                    settle(broken);
                    return true;
                }
                if (code.isFailure()) {
                    tally.failed(code);
                    if (failedIndex < 0 || index < failedIndex) {
                        failedIndex = index;
                        failedCode = code;
                        failedMessage = StatusChecks.message(statuses[index]);
                    }
                } else if (code != StatusCode.SUCCESS) {
                    inFlight[kept++] = index;
                }
            }
            boolean progressed = kept < inFlightCount;
            tally.leftFlight(inFlightCount - kept);
            inFlightCount = kept;
            if (failedIndex >= 0 && (mode == FailMode.FAIL_FAST || inFlightCount == 0)) {
                settle(failure());
            } else if (inFlightCount == 0) {
                tally.lag(statuses);
                settle(null);
            } else if (stall != null) {
                long now = clock.now(TimeUnit.NANOSECONDS);
                if (progressed) {
                    stall.progressAt(now);
                } else if (stall.stalledAt(now)) {
                    settle(failedIndex >= 0 ? failure()
                            : TransferException.stalled(stall.stallAfter(), inFlightCount, statuses.length));
                }
            }
            return settled;
        }

        /** The timeout's fallback: one last query; then a failure seen wins over the timeout. */
        synchronized boolean pollAtDeadline() {
            if (!poll()) {
                settle(failedIndex >= 0 ? failure() : TransferException.timedOut(transferTimeout));
            }
            return true;
        }

        synchronized Mono<Void> signal() {
            tally.ended(WaitOutcome.of(verdict), inFlightCount);
            return verdict == null ? Mono.empty() : Mono.error(verdict);
        }

        /** Whether the wait has settled with every status done. */
        synchronized boolean succeeded() {
            return settled && verdict == null;
        }

        /** The bytes of the statuses still in flight, or -1 if one does not tell (or breaks its contract). */
        synchronized long bytesInFlight() {
            long total = 0;
            for (int i = 0; i < inFlightCount; i++) {
                long bytes;
                try {
                    bytes = statuses[inFlight[i]].bytes();
                } catch (RuntimeException e) {
                    return -1;
                }
                if (bytes < 0) {
                    return -1;
                }
                total += bytes;
            }
            return total;
        }

        /** The subscriber cancelled. */
        synchronized void cancelled() {
            tally.ended(WaitOutcome.CANCELLED, inFlightCount);
        }

        private TransferException failure() {
            return TransferException.failed(failedCode, failedMessage);
        }

        private void settle(TransferException error) {
            settled = true;
            verdict = error;
        }
    }
}
