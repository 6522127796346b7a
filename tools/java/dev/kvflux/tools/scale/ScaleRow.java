package dev.kvflux.tools.scale;

import java.util.List;

/**
 * One line of the scale bench: a wait strategy at {@code n} concurrent requests, over the measured rounds.
 *
 * @param coresUsed process CPU time over wall time, from the first status's start to the last wait's end
 * @param lagP50Ms completion signal time minus the request's last status's finish time, median
 * @param queriesPerStatus {@code code()} calls per status
 * @param notifierBytesPerStatus bytes the notifier thread allocated per status it finished (the push path)
 * @param bytesPerStatusTick bytes allocated per status query while every status stays in flight (steady
 *     state of a polling wait; NaN for a wait that does not poll)
 * @param notifierBehindMs how late the notifier thread finished its last status (0 when it kept up)
 * @param notifierCores the notifier thread's CPU time over wall time (included in {@code coresUsed}): with
 *     push, the pushes themselves; with polling, only finishing the statuses
 * @param recorder what the waits reported to: {@code none} or {@code micrometer}
 * @param roundCpuMillis the waits' CPU time in each measured round, in order, for comparing recorders round by
 *     round (every round does the same work): the CPU of every Java thread alive through the round, read per
 *     thread in nanoseconds, without the notifier thread for a polling wait (there it only finishes statuses)
 *     and with it for push (there it runs the push path); GC threads are not counted
 * @param roundWakeups the process's voluntary context switches in each measured round, in order (-1 where
 *     the platform cannot tell): the scheduler threads' wake-ups, which most of a polling wait's CPU goes to
 * @param notifierLagP99Ms the notifiers' part of the lag, 99th percentile: how late a request's last status was
 *     finished (pushed) after its time; the rest of the lag is the wait's own
 * @param notifiers how many notifier threads finished the statuses
 * @param backendCores process CPU time over wall time with the same notifiers finishing the same number of statuses
 *     and no wait ({@link BackendAlone}): the stand-in backend's own share of {@code coresUsed}
 */
public record ScaleRow(String strategy, String recorder, int n, int statuses, int rounds, double coresUsed, double lagP50Ms,
                       double lagP99Ms, double lagMaxMs, double queriesPerStatus, long gcCount, long gcMillis,
                       long errors, long unfinished, double notifierBytesPerStatus, double bytesPerStatusTick,
                       double notifierBehindMs, double notifierCores, List<Double> roundCpuMillis,
                       List<Long> roundWakeups, double notifierLagP99Ms, int notifiers,
                       double backendCores) {
    public ScaleRow {
        roundCpuMillis = List.copyOf(roundCpuMillis);
        roundWakeups = List.copyOf(roundWakeups);
    }

    /**
     * What the wait adds to the process's CPU: {@code coresUsed} less {@code backendCores}, both measured in one run
     * (noise can make it slightly negative where the wait costs next to nothing).
     */
    public double waitCores() {
        return coresUsed - backendCores;
    }
}
