package dev.kvflux.operators;

import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The completion wait for backends that push completion ({@code reactive-push}): every status is queried
 * once at subscription (those already done need no push), then each {@link PushedStatus} still in flight
 * is awaited through its {@link PushedStatus#pushed()} publisher, so the wait ends as soon as the backend
 * announces the last copy, with no poll loop and no slice. A status that does not
 * push is polled every slice, as {@link CompletionWait} does.
 *
 * <h2>What {@link #await} emits</h2>
 * <ul>
 *   <li>All statuses SUCCESS: completes once the last one is pushed.</li>
 *   <li>A status fails: errors at once with a {@link TransferException} carrying its code and message
 *       (fail-fast: the first failure to arrive wins).</li>
 *   <li>Still in flight at {@code transferTimeout}: one last query of every status, then the seed's
 *       timeout error, unless that query finds them all done or one failed.</li>
 * </ul>
 *
 * <h2>On which thread</h2>
 * Every signal that does not happen during subscription arrives on the wait's {@link Scheduler}
 * ({@link Schedulers#parallel()} unless set, looked up at subscription): a push is handed from the
 * backend's notification thread to one of the scheduler's workers (one task hand-off, microseconds), and
 * the timeout and the polling of statuses that do not push run there too. So whatever the subscriber does
 * downstream never holds the backend's notification thread, which on GPUs is one thread shared by every
 * push of the process. Statuses all done (or one failed) at subscription signal at once, on the
 * subscriber's thread. Cancelling cancels every per-status subscription.
 */
public final class PushWait implements WaitStrategy {
    private final Duration transferTimeout;
    private final Duration slice;
    private final Scheduler scheduler;

    private PushWait(Duration transferTimeout, Duration slice, Scheduler scheduler) {
        this.transferTimeout = transferTimeout;
        this.slice = slice;
        this.scheduler = scheduler;
    }

    /**
     * A push wait bounded by {@code transferTimeout}.
     *
     * @throws IllegalArgumentException if the timeout is zero, negative or over 24 hours
     */
    public static PushWait of(Duration transferTimeout) {
        CompletionWait.checkTimeout(transferTimeout);
        return new PushWait(transferTimeout, CompletionWait.DEFAULT_SLICE, null);
    }

    /** This wait with its signals, its timeout and the polling of statuses that do not push on {@code scheduler}. */
    public PushWait scheduler(Scheduler scheduler) {
        return new PushWait(transferTimeout, slice, Objects.requireNonNull(scheduler, "scheduler"));
    }

    public Duration transferTimeout() {
        return transferTimeout;
    }

    @Override
    public String name() {
        return "reactive-push";
    }

    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        Objects.requireNonNull(statuses, "statuses");
        List<TransferStatus> snapshot = new ArrayList<>(statuses);
        for (int i = 0; i < snapshot.size(); i++) {
            Objects.requireNonNull(snapshot.get(i), "status " + i + " of the wait is null");
        }
        return Mono.defer(() -> {
            Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
            List<Mono<StatusCode>> terminals = new ArrayList<>(snapshot.size());
            for (TransferStatus status : snapshot) {
                StatusCode now = status.code();
                if (now.isTerminal()) {
                    terminals.add(Mono.just(now));
                } else {
                    // publishOn: the push arrives on the backend's notification thread; hand it over at once.
                    terminals.add(status instanceof PushedStatus pushed
                            ? pushed.pushed().publishOn(on)
                            : Signals.terminal(status, slice, on));
                }
            }
            return Flux.merge(terminals)
                    .concatMap(code -> code.isFailure()
                            ? Mono.<Void>error(failure(snapshot, code))
                            : Mono.<Void>empty())
                    .then()
                    .timeout(transferTimeout, Mono.defer(() -> atDeadline(snapshot)), on);
        });
    }

    private Mono<Void> atDeadline(List<TransferStatus> statuses) {
        boolean inFlight = false;
        for (TransferStatus status : statuses) {
            StatusCode code = status.code();
            if (code.isFailure()) {
                return Mono.error(TransferException.failed(code, status.message()));
            }
            inFlight |= !code.isTerminal();
        }
        return inFlight ? Mono.error(TransferException.timedOut(transferTimeout)) : Mono.empty();
    }

    private static TransferException failure(List<TransferStatus> statuses, StatusCode code) {
        for (TransferStatus status : statuses) {
            if (status.code() == code) {
                return TransferException.failed(code, status.message());
            }
        }
        return TransferException.failed(code, "");
    }

    @Override
    public String toString() {
        return "PushWait[timeout " + transferTimeout + "]";
    }
}
