package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The waits' shared metrics machinery: the name and tags of their publishers, a recorder that drops what
 * a user's recorder throws, the detection lag, and the recording around a wait that cannot see inside
 * itself (the native strategies, strategies from outside this library).
 */
final class WaitRecording {
    /** The name every wait's {@code Mono} carries, for {@code tap(Micrometer.metrics(registry))}. */
    static final String NAME = "kvflux.wait";

    private WaitRecording() {
    }

    /** {@code wait} named {@value #NAME} and tagged with the strategy and fail mode ({@code none} if null). */
    static <T> Mono<T> named(Mono<T> wait, String strategy, FailMode mode) {
        return wait.name(NAME).tag("strategy", strategy).tag("fail_mode", failModeTag(mode));
    }

    /**
     * {@code all}, a strategy's {@link WaitStrategy#awaitAll} {@code Mono}, named and tagged as the strategy's
     * {@code await} is: kvflux's own strategies are; one from elsewhere is left as it is.
     */
    static Mono<Void> namedAsAwait(WaitStrategy wait, Mono<Void> all) {
        return switch (wait) {
            case CompletionWait w -> named(all, w.strategyName(), w.mode());
            case PushWait w -> named(all, w.strategyName(), w.mode());
            case SlicedNativeWait w -> named(all, w.strategyName(), w.mode());
            case NativeWait w -> named(all, w.strategyName(), null);
            default -> all;
        };
    }

    /** {@code fail_fast}, {@code drain}, or {@code none} for a strategy without a fail mode. */
    static String failModeTag(FailMode mode) {
        return mode == null ? "none" : mode.name().toLowerCase(java.util.Locale.ROOT);
    }

    /** {@code recorder}, or a wrapper that drops its exceptions; {@link WaitRecorder#NOOP} stays itself. */
    static WaitRecorder safe(WaitRecorder recorder) {
        Objects.requireNonNull(recorder, "recorder");
        if (recorder == WaitRecorder.NOOP || recorder instanceof Safe) {
            return recorder;
        }
        return new Safe(recorder);
    }

    /**
     * From the latest copy end among {@code statuses} to now, on the clock of the status it belongs to;
     * -1 when a status cannot tell when its copies ended (or the list is empty). Call it when the wait
     * has just seen its last status settle.
     */
    static long detectionLag(TransferStatus[] statuses) {
        return TransferStatus.sinceLastCopyEnd(java.util.Arrays.asList(statuses));
    }

    /** Records a wait that ended at subscription because its list held null. */
    static void rejected(WaitRecorder recorder, String strategy, int statuses) {
        if (recorder != WaitRecorder.NOOP) {
            recorder.recordWaitStarted(strategy, statuses);
            recorder.recordStatusesInFlight(strategy, statuses);
            recorder.recordStatusFailed(strategy, StatusCode.ERR_BAD_STATE);
            ended(recorder, strategy, WaitOutcome.FAILED, 0, statuses, 0, 0, -1);
        }
    }

    /** The recorder's end of a wait: statuses left, polls, the lag (if done and known), the outcome. */
    static void ended(WaitRecorder recorder, String strategy, WaitOutcome outcome, long durationNanos, int stillInFlight,
                      int polls, long queries, long lagNanos) {
        if (stillInFlight > 0) {
            recorder.recordStatusesInFlight(strategy, -stillInFlight);
        }
        recorder.recordPolls(strategy, polls, queries);
        if (outcome == WaitOutcome.DONE && lagNanos >= 0) {
            recorder.recordDetectionLag(strategy, lagNanos);
        }
        recorder.recordWaitEnded(strategy, outcome, durationNanos);
    }

    /**
     * Records a wait that reports nothing itself: started at subscription, every status in flight until
     * the end; at the end the failed statuses (queried once more), the detection lag, the outcome.
     * {@code wait} is made per subscription, given a one-element counter of its poll rounds (read at the end).
     */
    static Mono<Void> around(java.util.function.Function<int[], Mono<Void>> waitCounting, WaitRecorder recorder,
                             String strategy, TransferStatus[] statuses, java.util.function.Supplier<Scheduler> clock) {
        if (recorder == WaitRecorder.NOOP) {
            return Mono.defer(() -> waitCounting.apply(new int[1]));
        }
        return Mono.defer(() -> {
            int[] counted = new int[1];
            java.util.function.IntSupplier polls = () -> counted[0];
            Mono<Void> wait = waitCounting.apply(counted);
            Scheduler time = clock.get();
            long start = time.now(TimeUnit.NANOSECONDS);
            AtomicBoolean ended = new AtomicBoolean();
            recorder.recordWaitStarted(strategy, statuses.length);
            recorder.recordStatusesInFlight(strategy, statuses.length);
            return wait
                    .doOnSuccess(v -> {
                        if (ended.compareAndSet(false, true)) {
                            ended(recorder, strategy, WaitOutcome.DONE, time.now(TimeUnit.NANOSECONDS) - start,
                                    statuses.length, polls.getAsInt(), 0, detectionLag(statuses));
                        }
                    })
                    .doOnError(e -> {
                        if (ended.compareAndSet(false, true)) {
                            WaitOutcome outcome = WaitOutcome.of(e);
                            if (outcome == WaitOutcome.FAILED) {
                                failures(recorder, strategy, statuses, e);
                            }
                            ended(recorder, strategy, outcome, time.now(TimeUnit.NANOSECONDS) - start,
                                    statuses.length, polls.getAsInt(), 0, -1);
                        }
                    })
                    .doOnCancel(() -> {
                        if (ended.compareAndSet(false, true)) {
                            ended(recorder, strategy, WaitOutcome.CANCELLED, time.now(TimeUnit.NANOSECONDS) - start,
                                    statuses.length, polls.getAsInt(), 0, -1);
                        }
                    });
        });
    }

    /** Each failed status, or the error's code when none shows one (a broken status, an engine's error). */
    private static void failures(WaitRecorder recorder, String strategy, TransferStatus[] statuses, Throwable e) {
        boolean seen = false;
        for (TransferStatus status : statuses) {
            StatusCode code;
            try {
                code = status == null ? null : status.code();
            } catch (RuntimeException broken) {
                code = null;
            }
            if (code != null && code.isFailure()) {
                recorder.recordStatusFailed(strategy, code);
                seen = true;
            }
        }
        if (!seen) {
            recorder.recordStatusFailed(strategy,
                    e instanceof TransferException t ? t.code() : StatusCode.ERR_BAD_STATE);
        }
    }

    /** Forwards every call, dropping what the recorder throws: metrics never change how a wait ends. */
    private record Safe(WaitRecorder recorder) implements WaitRecorder {
        @Override
        public void recordWaitStarted(String strategy, int statuses) {
            try {
                recorder.recordWaitStarted(strategy, statuses);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }

        @Override
        public void recordStatusesInFlight(String strategy, int change) {
            try {
                recorder.recordStatusesInFlight(strategy, change);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }

        @Override
        public void recordStatusFailed(String strategy, StatusCode code) {
            try {
                recorder.recordStatusFailed(strategy, code);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }

        @Override
        public void recordPolls(String strategy, int polls, long queries) {
            try {
                recorder.recordPolls(strategy, polls, queries);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }

        @Override
        public void recordDetectionLag(String strategy, long lagNanos) {
            try {
                recorder.recordDetectionLag(strategy, lagNanos);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }

        @Override
        public void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
            try {
                recorder.recordWaitEnded(strategy, outcome, durationNanos);
            } catch (RuntimeException ignored) {
                // see the class comment
            }
        }
    }

    /** {@code wait} (a strategy from outside this library) recorded around each await; see {@link WaitStrategy#recorder}. */
    static WaitStrategy recorded(WaitStrategy wait, WaitRecorder recorder) {
        WaitStrategy bare = wait instanceof Recorded r ? r.strategy() : wait;
        WaitRecorder safe = safe(recorder);
        return safe == WaitRecorder.NOOP ? bare : new Recorded(bare, safe);
    }

    private record Recorded(WaitStrategy strategy, WaitRecorder recorder) implements WaitStrategy {
        @Override
        public String strategyName() {
            return strategy.strategyName();
        }

        @Override
        public Mono<Void> await(java.util.List<? extends TransferStatus> statuses) {
            TransferStatus[] snapshot = StatusChecks.snapshot(statuses);
            return around(polls -> strategy.await(statuses), recorder, strategy.strategyName(), snapshot,
                    reactor.core.scheduler.Schedulers::parallel);
        }

        @Override
        public WaitStrategy recorder(WaitRecorder recorder) {
            return recorded(strategy, recorder);
        }
    }
}
