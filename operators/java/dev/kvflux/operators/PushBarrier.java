package dev.kvflux.operators;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;

/**
 * One subscription of a {@link PushWait}: counts the request's statuses as they settle and hands the
 * request to the scheduler once, through the wait's {@link SignalBatcher}. A push costs two atomic updates (three
 * when recording) and no allocation; the subscriber's signal, the clean-up of the other per-status subscriptions and
 * the verdict all run on the scheduler, or, with {@link PushWait#signalOnPush()}, on the pushing thread. A wait that a
 * push ended leaves its timers to a {@link TimerReaper}.
 */
final class PushBarrier {
    private static final VarHandle REMAINING;
    private static final VarHandle FAILED_INDEX;
    private static final VarHandle DONE;
    private static final VarHandle CODES = MethodHandles.arrayElementVarHandle(StatusCode[].class);
    private static final VarHandle UNREPORTED;
    private static final int NO_FAILURE = Integer.MAX_VALUE;

    static {
        try {
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            REMAINING = lookup.findVarHandle(PushBarrier.class, "remaining", int.class);
            FAILED_INDEX = lookup.findVarHandle(PushBarrier.class, "failedIndex", int.class);
            DONE = lookup.findVarHandle(PushBarrier.class, "done", boolean.class);
            UNREPORTED = lookup.findVarHandle(PushBarrier.class, "unreported", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final TransferStatus[] statuses;
    /**
     * The terminal code each status without a slot settled with; null while in flight. Set once: by a CAS, or at
     * subscription for a status that said it had settled (published to other threads by the update of
     * {@link #remaining} after it, or by the timers' scheduling).
     */
    private final StatusCode[] codes;
    private final PushSlot[] slots;
    private final FailMode mode;
    private final Scheduler on;
    /** Whether a push that ends the wait signals on its own thread rather than handing over to {@link #on}. */
    private final boolean signalOnPush;
    private final MonoSink<Void> sink;
    /** Where a wait that a push ended hands its timers over. */
    private final TimerReaper reaper;
    /** Where a wait that a push ended is handed to the scheduler, unless {@link #signalOnPush}. */
    private final SignalBatcher batcher;
    /** The next wait in {@link TimerReaper}'s batch; written before it is published there. */
    PushBarrier nextToReap;
    /** The next wait in {@link SignalBatcher}'s batch; written before it is published there. */
    PushBarrier nextToSignal;
    /** When the {@link SignalBatcher} batch it joined began, on the batcher's clock; written with {@link #nextToSignal}. */
    long batchSince;
    /** The scheduler that {@link SignalBatcher} batch's task was given to; written with {@link #nextToSignal}. */
    Scheduler batchOn;

    /** Statuses not yet settled, plus one while {@link #start} runs, so nothing ends the wait half-built. */
    private volatile int remaining;
    private volatile int failedIndex = NO_FAILURE;
    /** Recording only: the status whose copies ended last of those that succeeded so far. */
    private final LastCopyEnd lastCopyEnd;
    /**
     * Statuses whose settling the recorder has not been told of; taken whole (and made negative) by the wait's
     * reported end, so that a push that comes after the end (a listener cannot be taken back) is not reported again.
     */
    private volatile int unreported;
    private volatile boolean done;
    /** The poll of the statuses that do not push, the deadline and the stall check. */
    private final PushTimers timers;
    /** When a status last settled; null when stall detection is off. */
    private final StallClock stall;
    private TransferException verdict;
    /**
     * What is reported (see {@link WaitRecorder}). Its counts are written at subscription, then only under this
     * (ticks, the deadline, the stall check); its lag by whoever ends the wait, before it hands the signal
     * over; its end once, under this, by the one that emits or cancels.
     */
    private final WaitTally tally;

    PushBarrier(TransferStatus[] statuses, WaitSpec spec, Scheduler on, boolean signalOnPush, TimerReaper reaper,
                SignalBatcher batcher, MonoSink<Void> sink, String name) {
        this.signalOnPush = signalOnPush;
        this.reaper = reaper;
        this.batcher = batcher;
        this.tally = new WaitTally(spec.recorder(), name, on);
        this.statuses = statuses;
        this.lastCopyEnd = new LastCopyEnd(statuses);
        this.codes = new StatusCode[statuses.length];
        this.slots = new PushSlot[statuses.length];
        this.mode = spec.mode();
        this.stall = spec.stallAfter() != null ? new StallClock(spec.stallAfter(), on.now(TimeUnit.NANOSECONDS)) : null;
        this.on = on;
        this.sink = sink;
        this.timers = new PushTimers(this, spec, stall, tally, on);
    }

    /**
     * Counts the statuses that say they have settled ({@link PushedStatus#settledCode}), the successes in one update.
     * Listens to every other status that takes a listener, without querying it: it is told at once if the status has
     * settled, and by the push otherwise (a query here costs a native call per status, which on a GPU is most of what
     * a wait costs once its copies are done). Queries the others once and subscribes to the pushes of those in
     * flight. Then looks at the pushed statuses still in flight, newest first ({@link #lookNewestFirst}), and arms the
     * poll, the timeout and the stall check.
     */
    void start() {
        unreported = statuses.length;
        tally.started(statuses.length);
        tally.polled(0); // the query at subscription is the first poll round; its queries count one by one
        remaining = statuses.length + 1;
        // after the start is reported: a subscriber that has already cancelled has its cancel run here, at once
        sink.onCancel(this::cancel);
        if (done) {
            return;
        }
        int succeeded = 0;
        long lastEnd = LastCopyEnd.none();
        for (int i = 0; i < statuses.length && !done; i++) {
            if (statuses[i] instanceof PushedStatus pushed) {
                StatusCode known = settledCode(pushed);
                if (known == StatusCode.SUCCESS) {
                    // counted with the others found so, below: no listener, no atomic update per status
                    CODES.setRelease(codes, i, known);
                    succeeded++;
                    if (tally.recording()) {
                        lastEnd = LastCopyEnd.later(lastEnd, lastCopyEnd.endOf(i));
                    }
                    continue;
                }
                if (known != null) {
                    settle(i, known, false); // a failure: fail-fast ends the wait here, as a push would
                    continue;
                }
                if (listened(i, pushed)) {
                    continue;
                }
            }
            StatusCode code = query(i);
            if (code == null) {
                return;
            }
            if (code.isTerminal()) {
                continue;
            }
            if (statuses[i] instanceof PushedStatus pushed) {
                PushSlot slot = new PushSlot(this, i);
                slots[i] = slot;
                pushed.pushed().subscribe((CoreSubscriber<StatusCode>) slot);
                if (done) {
                    slot.cancel(); // the wait ended (a failure pushed meanwhile) before this slot was there to release
                }
            } else {
                timers.poll(i);
            }
        }
        if (succeeded > 0) {
            countedAtOnce(succeeded, lastEnd);
        }
        if (done) {
            return;
        }
        if (remaining > 1) {
            lookNewestFirst();
            if (done) {
                return;
            }
        }
        if (remaining == 1) {
            // Every status had settled: nothing left to time out. Arming a timer here would wake the scheduler's
            // thread (a new earliest deadline) only to cancel it again.
            if ((int) REMAINING.getAndAdd(this, -1) == 1) {
                finish(null, false);
            }
            return;
        }
        timers.arm();
        if (done) {
            disposeTimers();
        } else if ((int) REMAINING.getAndAdd(this, -1) == 1) {
            finish(null, false);
        }
    }

    /** How many statuses the wait waits for. */
    int size() {
        return statuses.length;
    }

    /** Whether the wait has ended (or been cancelled). */
    boolean isDone() {
        return done;
    }

    /** Whether a status has failed so far. */
    boolean sawFailure() {
        return failedIndex != NO_FAILURE;
    }

    /**
     * Status {@code index} settled with {@code code}: counts it, and ends the wait when it was the last or
     * (fail-fast) a failure. {@code handOff}: whether ending it must move to the scheduler (a push).
     */
    private void settle(int index, StatusCode code, boolean handOff) {
        PushSlot slot = slots[index];
        if (slot != null ? !slot.settle(code) : !CODES.compareAndSet(codes, index, (StatusCode) null, code)) {
            return;
        }
        counted(index, code, handOff);
    }

    /** Status {@code index} has just settled with {@code code} (once): counts it, maybe ends the wait. */
    void counted(int index, StatusCode code, boolean handOff) {
        if (tally.recording() && (int) UNREPORTED.getAndAdd(this, -1) > 0) {
            tally.leftFlight(1);
            if (code.isFailure()) {
                tally.failed(code);
            }
        }
        if (code == StatusCode.SUCCESS && tally.recording()) {
            lastCopyEnd.succeeded(index);
        }
        if (stall != null) {
            stall.progressAt(on.now(TimeUnit.NANOSECONDS));
        }
        if (code.isFailure()) {
            int seen = failedIndex;
            while (index < seen && !FAILED_INDEX.weakCompareAndSet(this, seen, index)) {
                seen = failedIndex;
            }
            if (mode == FailMode.FAIL_FAST) {
                finish(null, handOff);
                return;
            }
        }
        if ((int) REMAINING.getAndAdd(this, -1) == 1) {
            finish(null, handOff);
        }
    }

    /**
     * {@code count} statuses found settled with SUCCESS at subscription ({@link PushedStatus#settledCode}), their
     * copies ended last at {@code lastEnd}: counted as {@link #counted} counts each, in one update of each count. The
     * count held while {@link #start} runs keeps this from ending the wait.
     */
    private void countedAtOnce(int count, long lastEnd) {
        if (tally.recording()) {
            int before = (int) UNREPORTED.getAndAdd(this, -count);
            if (before > 0) {
                tally.leftFlight(Math.min(count, before));
            }
            lastCopyEnd.keep(lastEnd);
        }
        if (stall != null) {
            stall.progressAt(on.now(TimeUnit.NANOSECONDS));
        }
        REMAINING.getAndAdd(this, -count);
    }

    /** Ends the wait once: with {@code error}, or (null) with the earliest failure seen, or success. */
    void finish(TransferException error, boolean handOff) {
        if (!DONE.compareAndSet(this, false, true)) {
            return;
        }
        verdict = error;
        if (error == null && failedIndex == NO_FAILURE) {
            lastCopyEnd.lag(tally);
        } else if (error != null && error.kind() == TransferException.Kind.FAILED) {
            tally.failed(error.code());
        }
        if (!handOff) {
            emit();
        } else if (signalOnPush) {
            emitOnPush();
        } else {
            batcher.hand(this, on);
        }
    }

    /** Signals the end that a push handed to the {@link SignalBatcher}, on its task; the timers go to the reaper. */
    void signalHandedOver() {
        emit(true);
    }

    /**
     * Signals the subscriber, then releases the timers: whatever the subscriber waits for comes first, and a timer
     * that fires in between finds the wait done. A wait that ends with statuses unsettled (a failure, the timeout, a
     * stall) first stops awaiting their pushes.
     */
    private void emit() {
        emit(false);
    }

    /** Ends the wait on the pushing thread, its timers then left to the {@link TimerReaper}. */
    private void emitOnPush() {
        emit(true);
    }

    private void emit(boolean onPush) {
        if (remaining != 0) {
            cancelSlots();
        }
        try {
            signal();
        } finally {
            releaseTimers(onPush);
        }
    }

    private void signal() {
        TransferException error = verdict;
        int failed = failedIndex;
        if (error == null && failed != NO_FAILURE) {
            error = StatusChecks.failed(statuses[failed], codeOf(failed));
        }
        ended(WaitOutcome.of(error));
        if (error != null) {
            sink.error(error);
        } else {
            sink.success();
        }
    }

    /**
     * Reports the end: the statuses whose settling was not reported leave the wait's count, then polls, lag and
     * outcome. A status that settles later is not reported.
     */
    private void ended(WaitOutcome outcome) {
        if (tally.recording()) {
            int notReported = (int) UNREPORTED.getAndSet(this, Integer.MIN_VALUE / 2);
            synchronized (this) {
                tally.ended(outcome, Math.max(notReported, 0));
            }
        }
    }

    /** The statuses not settled yet. */
    int unsettled() {
        int unsettled = 0;
        for (int i = 0; i < statuses.length; i++) {
            if (codeOf(i) == null) {
                unsettled++;
            }
        }
        return unsettled;
    }

    /** The code status {@code index} settled with, or null while it is in flight. */
    StatusCode codeOf(int index) {
        PushSlot slot = slots[index];
        return slot != null ? slot.code : codes[index];
    }

    /** The subscriber cancelled: stop everything, signal nothing. */
    private void cancel() {
        if (DONE.compareAndSet(this, false, true)) {
            try {
                release(false);
            } finally {
                ended(WaitOutcome.CANCELLED);
            }
        }
    }

    /** Cancels the timers and the pushes still awaited; runs once the wait is done. */
    private void release(boolean onPush) {
        releaseTimers(onPush);
        if (remaining != 0) {
            cancelSlots();
        }
    }

    /** Cancels the timers; on a pushing thread ({@code onPush}) through the {@link TimerReaper}. */
    private void releaseTimers(boolean onPush) {
        if (onPush) {
            reaper.reap(this, on);
        } else {
            disposeTimers();
        }
    }

    /**
     * Stops awaiting the pushes of the statuses not settled. Not needed once every status has settled (the count
     * reached zero): on a push that ends a wait, skipping them is most of what ending it costs the pushing thread.
     */
    private void cancelSlots() {
        for (PushSlot slot : slots) {
            if (slot != null && slot.code == null) {
                slot.cancel();
            }
        }
    }

    /** Disposes the poll, the deadline and the stall check, those armed. */
    void disposeTimers() {
        timers.dispose();
    }

    /**
     * Queries the statuses that took a listener and are still in flight once each, from the last in the list
     * backwards, and stops at the first still in flight. A wait usually begins just as the request's last copies end
     * (on a GPU the host posting them is slower than the copies), before the backend has pushed the last statuses: a
     * query then ends the wait at once, on the subscriber's thread, where the push would have come one or more thread
     * wake-ups later. The statuses posted last are the ones likely unsettled, and one still in flight says the copies
     * are still running, so this costs one query per status it settles plus at most one; the pushes do the rest.
     */
    private void lookNewestFirst() {
        for (int i = statuses.length - 1; i >= 0 && !done && remaining > 1; i--) {
            PushSlot slot = slots[i];
            if (slot == null || !slot.listens || slot.code != null) {
                continue; // settled, polled, or subscribed to pushed() after a query just now
            }
            StatusCode code = query(i);
            if (code == null || !code.isTerminal()) {
                return;
            }
        }
    }

    /**
     * The terminal code {@code status} says it settled with, without a query; null while in flight, and for a status
     * that throws: a query, whose breach of the contract ends the wait, then tells.
     */
    private static StatusCode settledCode(PushedStatus status) {
        try {
            StatusCode known = status.settledCode();
            return known != null && known.isTerminal() ? known : null;
        } catch (RuntimeException broken) {
            return null;
        }
    }

    /** Listens to status {@code index}'s pushes through a listener; false if it takes none. */
    private boolean listened(int index, PushedStatus pushed) {
        PushSlot slot = new PushSlot(this, index);
        slot.listens = true;
        slots[index] = slot;
        if (!pushed.onPushed(slot)) {
            slots[index] = null;
            return false;
        }
        if (done) {
            slot.cancel(); // the wait ended (a failure pushed meanwhile) before this slot was there to release
        }
        return true;
    }

    /**
     * Queries status {@code index} once, on the querying thread, and settles it if terminal; null if it
     * broke the contract, which has then ended the wait.
     */
    StatusCode query(int index) {
        tally.queried();
        StatusCode code;
        try {
            code = StatusChecks.code(statuses, index);
        } catch (TransferException broken) {
            finish(broken, false);
            return null;
        }
        if (code.isTerminal()) {
            settle(index, code, false);
        }
        return code;
    }
}
