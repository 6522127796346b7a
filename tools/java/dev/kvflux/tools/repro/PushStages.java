package dev.kvflux.tools.repro;

import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.TransferStatus;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One push wait's detection lag, stage by stage: from the last copy's end on the GPU (where the target measures it
 * with timing events) through the {@linkplain PushTimeline stages of the push} that ended the wait (the status that
 * settled last), to the wait reporting its end on its own thread ({@code wait_ended}) and the caller blocked on it
 * running again ({@code caller_woke}). Each stage is the milliseconds since the stage before it that the wait passed:
 * a stage a backend does not have counts toward the next one it has. Where that push had settled before the wait
 * even began (the copies ended while the caller was still posting), {@code wait_began} stands between the push's
 * stages and the wait's end: the lag then holds time in which nobody waited yet. A push wait that ended during its
 * subscription, on the caller's thread, awaited no push: its stages are {@linkplain #atSubscription those of the
 * subscription}.
 */
final class PushStages {
    /** The stage of a wait that ended during its subscription, on the caller's thread, with no push to await. */
    static final String ENDED_AT_SUBSCRIPTION = "ended_at_subscription";
    /** The stage before it: the wait was built and subscribed to, and began its work on the statuses. */
    static final String SUBSCRIBED = "subscribed";

    /** Every stage, in order; {@code callback_ran} is timed from the GPU's copy end. */
    static final List<String> NAMES;

    static {
        List<String> names = new ArrayList<>(PushTimeline.STAGES);
        names.add("wait_began");
        names.add(SUBSCRIBED);
        names.add(ENDED_AT_SUBSCRIPTION);
        names.add("wait_ended");
        names.add("caller_woke");
        NAMES = Collections.unmodifiableList(names);
    }

    private PushStages() {
    }

    /**
     * The timeline of the push that ended a wait over {@code statuses}: of the status that settled last by a push;
     * null when none did. Read it before the statuses are released.
     */
    static PushTimeline last(List<? extends TransferStatus> statuses) {
        PushTimeline last = null;
        for (TransferStatus status : statuses) {
            if (status instanceof PushedStatus pushed) {
                PushTimeline t = pushed.timeline();
                if (t.settled() != TransferStatus.UNKNOWN_TIME && (last == null || t.settled() > last.settled())) {
                    last = t;
                }
            }
        }
        return last;
    }

    /**
     * The stages of one wait that began at {@code waitBegan} and saw the push {@code last} (null: none), its
     * subscriber signalled at {@code waitEnded} and its caller running again at {@code callerWoke};
     * {@code gpuCopyEnd} is the last copy's end from timing events, or unknown. Empty when no push settled a status.
     */
    static Map<String, Double> of(PushTimeline last, long gpuCopyEnd, long waitBegan, long waitEnded,
                                  long callerWoke) {
        if (last == null) {
            return Map.of();
        }
        long[] pushTimes = last.times();
        long[] times = new long[NAMES.size()];
        java.util.Arrays.fill(times, TransferStatus.UNKNOWN_TIME);
        System.arraycopy(pushTimes, 0, times, 0, pushTimes.length);
        times[pushTimes.length] = waitBegan > last.settled() ? waitBegan : TransferStatus.UNKNOWN_TIME;
        times[NAMES.indexOf("wait_ended")] = waitEnded;
        times[NAMES.indexOf("caller_woke")] = callerWoke;
        return stages(times, gpuCopyEnd);
    }

    /**
     * The stages of one wait that ended during its subscription, on the caller's thread, no push awaited (its last
     * statuses were settled already, or settled by the wait's look at them): {@code wait_began} where the copies
     * ended before the wait began; {@value #SUBSCRIBED}, to when the wait began its work on the statuses
     * ({@code subscribed}, unknown: none), where the copies had ended by then; {@value #ENDED_AT_SUBSCRIPTION}, to the
     * wait's reported end; then {@code caller_woke}. Each from the one before it, the first from the copies' end (the
     * wait's start where that is unknown). The pushes of earlier statuses, if any, do not count: they did not end this wait.
     */
    static Map<String, Double> atSubscription(long gpuCopyEnd, long waitBegan, long subscribed, long waitEnded,
                                              long callerWoke) {
        long[] times = new long[NAMES.size()];
        java.util.Arrays.fill(times, TransferStatus.UNKNOWN_TIME);
        boolean copyEndKnown = gpuCopyEnd != TransferStatus.UNKNOWN_TIME;
        times[NAMES.indexOf("wait_began")] = copyEndKnown && waitBegan > gpuCopyEnd ? waitBegan
                : TransferStatus.UNKNOWN_TIME;
        times[NAMES.indexOf(SUBSCRIBED)] = subscribed != TransferStatus.UNKNOWN_TIME
                && (!copyEndKnown || subscribed > gpuCopyEnd) ? subscribed : TransferStatus.UNKNOWN_TIME;
        times[NAMES.indexOf(ENDED_AT_SUBSCRIPTION)] = waitEnded;
        times[NAMES.indexOf("caller_woke")] = callerWoke;
        return stages(times, copyEndKnown ? gpuCopyEnd : waitBegan);
    }

    /** Each known time in {@code times} (indexed as {@link #NAMES}) as the milliseconds since the one before it. */
    private static Map<String, Double> stages(long[] times, long from) {
        Map<String, Double> stages = new LinkedHashMap<>();
        long before = from;
        for (int i = 0; i < times.length; i++) {
            if (times[i] == TransferStatus.UNKNOWN_TIME) {
                continue;
            }
            if (before != TransferStatus.UNKNOWN_TIME) {
                stages.put(NAMES.get(i), Math.max(0, times[i] - before) / 1e6);
            }
            before = times[i];
        }
        return Collections.unmodifiableMap(stages);
    }
}
