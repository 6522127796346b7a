package dev.kvflux.operators;

import dev.kvflux.bindings.StatusCode;

/**
 * What a wait tells about itself, for metrics: plug one into a wait strategy with its {@code recorder(...)}
 * wither ({@link WaitStrategy#recorder}) and turn the calls into meters of your own, or use kvflux's
 * Micrometer module ({@code MicrometerWaitRecorder}). The default, {@link #NOOP}, records nothing and costs
 * nothing measurable.
 *
 * <h2>What one wait reports</h2>
 * Every subscription of a wait's {@code Mono} reports, in this order:
 * <ol>
 *   <li>{@link #recordWaitStarted} once, then {@link #recordStatusesInFlight} with its statuses;</li>
 *   <li>while it waits: {@link #recordStatusesInFlight} with a negative change each time statuses leave
 *       flight, and {@link #recordStatusFailed} once for each status it sees fail (and once with
 *       {@link StatusCode#ERR_BAD_STATE} for a status that breaks the {@code TransferStatus} contract);</li>
 *   <li>when it ends, once: {@link #recordStatusesInFlight} for the statuses still in flight (they leave the
 *       wait's count), {@link #recordPolls}, {@link #recordDetectionLag} when it ended {@link WaitOutcome#DONE}
 *       and every status's backend knows when its copies ended, then {@link #recordWaitEnded}.</li>
 * </ol>
 * A push wait reports each status once: one that settles after the wait has counted it as still in flight is not
 * reported again. A push that settles a status on one thread just as the wait ends on another (a fail-fast failure,
 * the timeout, a cancel) may have its {@link #recordStatusesInFlight} and {@link #recordStatusFailed} arrive just
 * after {@link #recordWaitEnded}; the sum of the changes stays exact.
 * So the sum of {@link #recordStatusesInFlight}'s changes over every wait is the number of statuses that
 * waits are waiting for now, as far as they have seen. The native strategies ({@code native},
 * {@code sliced-native}) see nothing inside the engine's blocking call: they report their statuses in flight
 * at the start and all of them leaving at the end, and failures at the end.
 *
 * <h2>Clocks</h2>
 * Durations are read on the wait's scheduler clock ({@code Scheduler.now}), so virtual time drives them in
 * tests; Reactor's own schedulers read the wall clock in whole milliseconds. The detection lag is read on the
 * clock of the backend that completed the status ({@link dev.kvflux.bindings.TransferStatus#clockNanos()}),
 * the clock its completion time was taken on, never mixed with the scheduler's.
 *
 * <h2>Threads and cost</h2>
 * Calls come from whichever thread the wait runs on: the scheduler's, the subscriber's (a wait that ends at
 * subscription), a backend's notification thread (a push wait's statuses leaving flight and its detection
 * lag). Implementations must be thread-safe and quick, and should not allocate. A wait makes no call per
 * poll: polls and queries are counted in the wait and reported once at its end; statuses leaving flight
 * are reported once per poll that saw some leave, or once per push. An exception thrown by a recorder is
 * dropped; it never changes how the wait ends.
 *
 * <p>{@code strategy} is the strategy's {@link WaitStrategy#strategyName() name}: {@code reactive},
 * {@code reactive-shared} ({@link CompletionWait#sharedPoll()}), {@code reactive-push}, {@code native},
 * {@code sliced-native} (the constants {@link WaitStrategy#REACTIVE} and the others); one of a few constant
 * strings, so it is cheap to key meters by.
 */
public interface WaitRecorder {

    /** Records nothing. */
    WaitRecorder NOOP = new WaitRecorder() {
        @Override
        public String toString() {
            return "WaitRecorder.NOOP";
        }
    };

    /** A wait over {@code statuses} statuses was subscribed. */
    default void recordWaitStarted(String strategy, int statuses) {
    }

    /**
     * The statuses a wait is waiting for changed by {@code change}: positive when it starts, negative as
     * statuses settle and, at its end, for those it no longer waits for.
     */
    default void recordStatusesInFlight(String strategy, int change) {
    }

    /** A status the wait queried failed with {@code code} (a failure code, or ERR_BAD_STATE for a broken status). */
    default void recordStatusFailed(String strategy, StatusCode code) {
    }

    /**
     * At a wait's end: the poll rounds it made ({@code polls}: the query at subscription, each slice, the
     * last query at the timeout; for the native strategies, each engine {@code waitAll} call) and the status
     * queries ({@code code()} calls) those rounds made; a push wait counts its queries of statuses
     * that do not push and of those in flight at subscription.
     */
    default void recordPolls(String strategy, int polls, long queries) {
    }

    /**
     * For a wait that ended {@link WaitOutcome#DONE} over statuses whose backends all know when their copies
     * ended: from the moment the last copy ended to the moment the wait saw the last status settle, in
     * nanoseconds of that status's backend clock; never negative.
     */
    default void recordDetectionLag(String strategy, long lagNanos) {
    }

    /** A wait ended with {@code outcome}, {@code durationNanos} after it was subscribed (the wait's scheduler clock). */
    default void recordWaitEnded(String strategy, WaitOutcome outcome, long durationNanos) {
    }
}
