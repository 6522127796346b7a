package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.util.concurrent.TimeUnit;
import reactor.core.scheduler.Scheduler;

/**
 * What one wait tells its {@link WaitRecorder}, in the order the recorder's contract gives: its start, statuses
 * leaving flight and failing as the wait sees them, and at its end, once, its polls and queries (counted here
 * as it goes, never reported per poll), its detection lag and its outcome. With {@link WaitRecorder#NOOP}
 * every call returns at once and nothing is counted.
 *
 * <p>No locks. {@link #leftFlight} and {@link #failed} only forward to the (thread-safe) recorder and may be
 * called from any thread, a push wait's backend thread included; the calls that count or end
 * ({@link #started}, {@link #polled}, {@link #queried}, {@link #lag}, {@link #lagOf}, {@link #ended}) change plain fields and
 * must come one at a time, which each wait ensures in its own way ({@link CompletionWait}'s tracker by its
 * monitor, {@link PushBarrier} by its monitor and its one end).
 */
final class WaitTally {
    private final WaitRecorder recorder;
    private final boolean recording;
    private final String name;
    private final Scheduler clock;
    private long startNanos;
    private int polls;
    private long queries;
    private long lagNanos = -1;
    private boolean ended;

    /** A tally for a wait reporting as {@code name} to {@code recorder}, timed on {@code clock}. */
    WaitTally(WaitRecorder recorder, String name, Scheduler clock) {
        this.recorder = recorder;
        this.recording = recorder != WaitRecorder.NOOP;
        this.name = name;
        this.clock = clock;
    }

    /** Whether the wait reports to a recorder (not {@link WaitRecorder#NOOP}). */
    boolean recording() {
        return recording;
    }

    /** The wait started over {@code statuses} statuses, all in flight; its duration counts from now. */
    void started(int statuses) {
        if (recording) {
            startNanos = clock.now(TimeUnit.NANOSECONDS);
            recorder.recordWaitStarted(name, statuses);
            recorder.recordStatusesInFlight(name, statuses);
        }
    }

    /** One poll round, which queried {@code queried} statuses. */
    void polled(int queried) {
        if (recording) {
            polls++;
            queries += queried;
        }
    }

    /** One status query outside a counted round. */
    void queried() {
        if (recording) {
            queries++;
        }
    }

    /** {@code count} statuses left flight (settled). */
    void leftFlight(int count) {
        if (recording && count > 0) {
            recorder.recordStatusesInFlight(name, -count);
        }
    }

    /** A status the wait queried failed with {@code code} (ERR_BAD_STATE for one that broke the contract). */
    void failed(StatusCode code) {
        if (recording) {
            recorder.recordStatusFailed(name, code);
        }
    }

    /**
     * The wait has just seen its last status succeed, the last copies having ended at {@code endedAt} on the clock of
     * {@code clock} (null when unknown): takes the detection lag now, from that one clock.
     */
    void lagOf(TransferStatus clock, long endedAt) {
        if (recording) {
            lagNanos = -1;
            if (clock != null) {
                try {
                    lagNanos = Math.max(0, clock.clockNanos() - endedAt);
                } catch (RuntimeException broken) {
                    lagNanos = -1; // as TransferStatus.sinceLastCopyEnd answers for a status that throws
                }
            }
        }
    }

    /** The wait has just seen its last status succeed: takes the detection lag now. */
    void lag(TransferStatus[] statuses) {
        if (recording) {
            lagNanos = WaitRecording.detectionLag(statuses);
        }
    }

    /**
     * The wait ended with {@code outcome}, {@code stillInFlight} statuses not settled: reports its end, the first
     * time only.
     */
    void ended(WaitOutcome outcome, int stillInFlight) {
        if (recording && !ended) {
            ended = true;
            WaitRecording.ended(recorder, name, outcome, clock.now(TimeUnit.NANOSECONDS) - startNanos, stillInFlight,
                    polls, queries, lagNanos);
        }
    }
}
