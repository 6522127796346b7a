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
 * stages and the wait's end: the lag then holds time in which nobody waited yet.
 */
final class PushStages {
    /** Every stage, in order; {@code callback_ran} is timed from the GPU's copy end. */
    static final List<String> NAMES;

    static {
        List<String> names = new ArrayList<>(PushTimeline.STAGES);
        names.add("wait_began");
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
        long[] times = new long[pushTimes.length + 3];
        System.arraycopy(pushTimes, 0, times, 0, pushTimes.length);
        times[pushTimes.length] = waitBegan > last.settled() ? waitBegan : TransferStatus.UNKNOWN_TIME;
        times[pushTimes.length + 1] = waitEnded;
        times[pushTimes.length + 2] = callerWoke;
        Map<String, Double> stages = new LinkedHashMap<>();
        long before = gpuCopyEnd;
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
