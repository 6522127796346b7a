package dev.kvflux.testing;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.operators.WaitOutcome;
import dev.kvflux.operators.WaitRecorder;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** A {@link WaitRecorder} that keeps every call, for tests to read. */
public final class RecordingWaitRecorder implements WaitRecorder {
    /** One wait's end as reported. */
    public record Ended(String strategy, WaitOutcome outcome, Duration duration) {
    }

    /** One {@code recordPolls} call. */
    public record Polled(String strategy, int polls, long queries) {
    }

    public final List<String> started = new CopyOnWriteArrayList<>();
    public final List<Integer> startedStatuses = new CopyOnWriteArrayList<>();
    public final List<Integer> inFlightChanges = new CopyOnWriteArrayList<>();
    public final List<StatusCode> failures = new CopyOnWriteArrayList<>();
    public final List<Polled> polls = new CopyOnWriteArrayList<>();
    public final List<Duration> lags = new CopyOnWriteArrayList<>();
    public final List<Ended> ended = new CopyOnWriteArrayList<>();
    /** Every call's name in order, to check the order the interface promises. */
    public final List<String> order = new CopyOnWriteArrayList<>();

    @Override
    public void recordWaitStarted(String strategy, int statuses) {
        order.add("started");
        started.add(strategy);
        startedStatuses.add(statuses);
    }

    @Override
    public void recordStatusesInFlight(String strategy, int change) {
        order.add("inFlight");
        inFlightChanges.add(change);
    }

    @Override
    public void recordStatusFailed(String strategy, StatusCode code) {
        order.add("failed");
        failures.add(code);
    }

    @Override
    public void recordPolls(String strategy, int polls, long queries) {
        order.add("polls");
        this.polls.add(new Polled(strategy, polls, queries));
    }

    @Override
    public void recordDetectionLag(String strategy, long lagNanos) {
        order.add("lag");
        lags.add(Duration.ofNanos(lagNanos));
    }

    @Override
    public void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
        order.add("ended");
        ended.add(new Ended(strategy, outcome, Duration.ofNanos(durationNanos)));
    }

    /** The statuses waits are still waiting for, by the changes reported. */
    public int inFlight() {
        return inFlightChanges.stream().mapToInt(Integer::intValue).sum();
    }

    /** The one wait's end; fails unless exactly one was reported. */
    public Ended theEnd() {
        if (ended.size() != 1) {
            throw new AssertionError("expected one wait end, got " + ended);
        }
        return ended.get(0);
    }
}
