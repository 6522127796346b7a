package dev.kvflux.tools.repro;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.operators.WaitStrategy;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * vLLM's completion wait as its MoRIIO connector does it today ({@value #NAME}), the baseline kvflux's waits are
 * measured against, not one of kvflux's own: one thread, shared by every wait of this strategy in the process,
 * queries every in-flight status of every waiting request, then sleeps 1 ms, and again ({@link StatusSweeper}).
 *
 * <h2>What {@link #await} emits</h2>
 * <ul>
 *   <li>An empty list: completes at once, on the subscriber's thread.</li>
 *   <li>All statuses SUCCESS: completes at the first sweep that sees it (statuses already done at subscription
 *       too: the first query is the next sweep's, within about 1 ms).</li>
 *   <li>A status fails: in {@link FailMode#FAIL_FAST} errors at the sweep that sees it; in {@link FailMode#DRAIN}
 *       once no status is in flight any more. The error is a {@link TransferException} of kind
 *       {@link TransferException.Kind#FAILED} with the failed status's code and message; when several failed, the
 *       earliest in the list among those seen wins, and a failure wins over the timeout.</li>
 *   <li>Statuses still in flight at the first sweep at or after {@code transferTimeout} from subscription (that
 *       sweep queries them once more): a {@link TransferException} of kind {@link TransferException.Kind#TIMED_OUT}
 *       with code IN_PROGRESS and the message {@code MoRIIO batch wait failed (StatusCode.IN_PROGRESS): RDMA
 *       transfer timed out after 30s}, as {@link dev.kvflux.operators.CompletionWait}'s.</li>
 *   <li>A status that breaks the {@link TransferStatus} contract (the list holds null, or a {@code code()} throws
 *       or returns null): a {@link TransferException} with code {@link StatusCode#ERR_BAD_STATE} and the thrown
 *       exception as its cause, in either mode.</li>
 * </ul>
 * Only statuses still in flight are queried. Every query and every signal but the empty list's happens on the
 * sweeping thread, {@value StatusSweeper#THREAD_NAME}: a subscriber that works on its signal holds up every
 * other request's sweep, as in vLLM, so move such work elsewhere ({@code publishOn}). Cancelling the
 * {@code Mono} drops the request from the sweep: its statuses are not queried again. No stall detection and no
 * slice: the period is vLLM's 1 ms.
 *
 * <p>{@link #recorder} reports each wait to a {@link WaitRecorder} as kvflux's waits do (its sweeps as polls, its
 * status queries, its failed statuses, its end), its end on the sweeping thread, but no detection lag:
 * {@code kvflux repro} and {@code kvflux bench} take the lag from the statuses themselves.
 */
public final class SweepWait implements WaitStrategy {
    /** The strategy's name, in {@code kvflux repro --wait} and {@code kvflux bench --strategies}. */
    public static final String NAME = "poll-1ms";

    private final WaitSpec spec;

    private SweepWait(WaitSpec spec) {
        this.spec = spec;
    }

    /**
     * A wait in {@code mode}, bounded by {@code transferTimeout}, recording nothing.
     *
     * @throws IllegalArgumentException if {@code transferTimeout} is zero, negative or over 24 hours
     */
    public static SweepWait of(FailMode mode, Duration transferTimeout) {
        return new SweepWait(WaitSpec.of(mode, transferTimeout));
    }

    /** This wait, reporting each subscription to {@code recorder}; {@link WaitRecorder#NOOP} turns it off. */
    @Override
    public SweepWait recorder(WaitRecorder recorder) {
        return new SweepWait(spec.recorder(recorder));
    }

    public FailMode mode() {
        return spec.mode();
    }

    public Duration transferTimeout() {
        return spec.transferTimeout();
    }

    /** {@value #NAME}. */
    @Override
    public String strategyName() {
        return NAME;
    }

    /** {@inheritDoc} Named {@code kvflux.wait} and tagged {@code strategy} and {@code fail_mode}, as kvflux's. */
    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        TransferStatus[] snapshot = Objects.requireNonNull(statuses, "statuses").toArray(new TransferStatus[0]);
        return Mono.<Void>create(sink -> {
                    Request request = new Request(snapshot, spec, sink);
                    for (int i = 0; i < snapshot.length; i++) {
                        if (snapshot[i] == null) {
                            request.endBroken(TransferException.badState("status " + i + " of " + snapshot.length
                                    + " is null", null));
                            return;
                        }
                    }
                    if (snapshot.length == 0) {
                        request.end(null);
                        return;
                    }
                    sink.onCancel(request::cancel);
                    StatusSweeper.shared().register(request);
                })
                .name("kvflux.wait").tag("strategy", NAME)
                .tag("fail_mode", spec.mode().name().toLowerCase(Locale.ROOT));
    }

    @Override
    public String toString() {
        return "SweepWait[" + spec.mode() + ", timeout " + DurationText.of(spec.transferTimeout())
                + ", every 1ms on one thread]";
    }

    /**
     * One request in the sweep. Made and started on the subscriber's thread, then touched by the sweeping thread
     * only (the registration queue hands it over), but for {@link #cancel}, a volatile flag the next sweep reads.
     */
    private static final class Request implements StatusSweeper.Swept {
        private final TransferStatus[] statuses;
        private final FailMode mode;
        private final Duration transferTimeout;
        private final long deadline;
        private final MonoSink<Void> sink;
        private final WaitRecorder recorder;
        private final boolean recording;
        private final long startNanos;
        private final int[] inFlight;
        private int inFlightCount;
        private int failedIndex = -1;
        private StatusCode failedCode;
        private String failedMessage;
        private int polls;
        private long queries;
        private volatile boolean cancelled;

        Request(TransferStatus[] statuses, WaitSpec spec, MonoSink<Void> sink) {
            this.statuses = statuses;
            this.mode = spec.mode();
            this.transferTimeout = spec.transferTimeout();
            this.startNanos = System.nanoTime();
            this.deadline = startNanos + transferTimeout.toNanos();
            this.sink = sink;
            this.recorder = spec.recorder();
            this.recording = recorder != WaitRecorder.NOOP;
            this.inFlight = new int[statuses.length];
            for (int i = 0; i < statuses.length; i++) {
                inFlight[i] = i;
            }
            this.inFlightCount = statuses.length;
            if (recording) {
                recorder.recordWaitStarted(NAME, statuses.length);
                recorder.recordStatusesInFlight(NAME, statuses.length);
            }
        }

        void cancel() {
            cancelled = true;
        }

        @Override
        public boolean sweep(long now) {
            if (cancelled) {
                ended(WaitOutcome.CANCELLED);
                return true;
            }
            polls++;
            queries += inFlightCount;
            int kept = 0;
            for (int i = 0; i < inFlightCount; i++) {
                int index = inFlight[i];
                StatusCode code;
                try {
                    code = statuses[index].code();
                } catch (RuntimeException e) {
                    endBroken(broken(index, "code() threw " + e, e));
                    return true;
                }
                if (code == null) {
                    endBroken(broken(index, "code() returned null", null));
                    return true;
                }
                if (code.isFailure()) {
                    failedAt(index, code);
                } else if (code != StatusCode.SUCCESS) {
                    inFlight[kept++] = index;
                }
            }
            if (recording && kept < inFlightCount) {
                recorder.recordStatusesInFlight(NAME, kept - inFlightCount);
            }
            inFlightCount = kept;
            if (failedIndex >= 0 && (mode == FailMode.FAIL_FAST || inFlightCount == 0)) {
                end(TransferException.failed(failedCode, failedMessage));
            } else if (inFlightCount == 0) {
                end(null);
            } else if (now - deadline >= 0) {
                end(failedIndex >= 0 ? TransferException.failed(failedCode, failedMessage)
                        : TransferException.timedOut(transferTimeout));
            } else {
                return false;
            }
            return true;
        }

        /** A status failed with {@code code}: recorded, and kept as the verdict if it is the earliest in the list. */
        private void failedAt(int index, StatusCode code) {
            if (recording) {
                recorder.recordStatusFailed(NAME, code);
            }
            if (failedIndex < 0 || index < failedIndex) {
                failedIndex = index;
                failedCode = code;
                String message;
                try {
                    message = statuses[index].message();
                } catch (RuntimeException e) {
                    message = "(message() threw " + e + ")";
                }
                failedMessage = message == null ? "" : message;
            }
        }

        private TransferException broken(int index, String what, Throwable cause) {
            return TransferException.badState("status " + index + " of " + statuses.length + ": " + what, cause);
        }

        /** Ends the wait with {@code error} for a status that broke the contract, reported as failed ERR_BAD_STATE. */
        void endBroken(TransferException error) {
            if (recording) {
                recorder.recordStatusFailed(NAME, StatusCode.ERR_BAD_STATE);
            }
            end(error);
        }

        /** Ends the wait: success when {@code error} is null. Reports first, then signals the subscriber. */
        void end(TransferException error) {
            ended(error == null ? WaitOutcome.DONE : error.isTimeout() ? WaitOutcome.TIMED_OUT : WaitOutcome.FAILED);
            if (error == null) {
                sink.success();
            } else {
                sink.error(error);
            }
        }

        /** The recorder's end of the wait, in the order {@link WaitRecorder} promises. */
        private void ended(WaitOutcome outcome) {
            if (!recording) {
                return;
            }
            if (inFlightCount > 0) {
                recorder.recordStatusesInFlight(NAME, -inFlightCount);
            }
            recorder.recordPolls(NAME, polls, queries);
            recorder.recordWaitEnded(NAME, outcome, System.nanoTime() - startNanos);
        }
    }
}
