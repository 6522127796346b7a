package dev.kvflux.micrometer;

import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitStrategy;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.contextpropagation.ObservationThreadLocalAccessor;
import java.util.List;
import java.util.Objects;
import reactor.core.publisher.Mono;

/**
 * A wait strategy whose every wait is a Micrometer {@link Observation} named {@value #NAME}, for registries that turn
 * observations into both metrics and traces: {@code ObservedWait.of(CompletionWait.failFast(timeout), registry)}.
 *
 * <p>Keys of low cardinality, fit for metrics: {@code strategy} (the wrapped strategy's name) and {@code outcome}
 * ({@code done}, {@code failed}, {@code timed_out}, {@code stalled}, {@code cancelled}) and, for a failure,
 * {@code code} (the status code). Keys of high cardinality, for traces only: {@code transfer_id} when the subscriber's
 * Reactor {@code Context} holds one under {@value #TRANSFER_ID} (as the transfer lifecycle puts it there), and
 * {@code statuses}, how many statuses the wait had. The observation's parent is the one in the subscriber's
 * Context under {@link ObservationThreadLocalAccessor}'s key, if any.
 */
public final class ObservedWait implements WaitStrategy {
    /** The observation's name. */
    public static final String NAME = "kvflux.wait";
    /** The Reactor Context key a transfer id is read from. */
    public static final String TRANSFER_ID = "transfer_id";

    private final WaitStrategy wait;
    private final ObservationRegistry registry;

    private ObservedWait(WaitStrategy wait, ObservationRegistry registry) {
        this.wait = wait;
        this.registry = registry;
    }

    /** {@code wait} with each of its waits observed in {@code registry}. */
    public static ObservedWait of(WaitStrategy wait, ObservationRegistry registry) {
        return new ObservedWait(Objects.requireNonNull(wait, "wait"), Objects.requireNonNull(registry, "registry"));
    }

    @Override
    public String strategyName() {
        return wait.strategyName();
    }

    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        Objects.requireNonNull(statuses, "statuses");
        return Mono.deferContextual(context -> {
            Observation observation = Observation.createNotStarted(NAME, registry)
                    .lowCardinalityKeyValue("strategy", wait.strategyName())
                    .highCardinalityKeyValue("statuses", Integer.toString(statuses.size()));
            context.<Object>getOrEmpty(TRANSFER_ID)
                    .ifPresent(id -> observation.highCardinalityKeyValue("transfer_id", id.toString()));
            context.<Observation>getOrEmpty(ObservationThreadLocalAccessor.KEY)
                    .ifPresent(observation::parentObservation);
            observation.start();
            return wait.await(statuses)
                    .doOnSuccess(v -> observation.lowCardinalityKeyValue("outcome", "done"))
                    .doOnError(e -> {
                        observation.lowCardinalityKeyValue("outcome", outcome(e));
                        if (e instanceof TransferException t) {
                            observation.lowCardinalityKeyValue("code", t.code().name());
                        }
                        observation.error(e);
                    })
                    .doOnCancel(() -> observation.lowCardinalityKeyValue("outcome", "cancelled"))
                    .doFinally(signal -> observation.stop());
        });
    }

    @Override
    public String toString() {
        return "ObservedWait[" + wait + "]";
    }

    private static String outcome(Throwable e) {
        if (e instanceof TransferException t) {
            return switch (t.kind()) {
                case FAILED -> "failed";
                case TIMED_OUT -> "timed_out";
                case STALLED -> "stalled";
            };
        }
        return "failed";
    }
}
