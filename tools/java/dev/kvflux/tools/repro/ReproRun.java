package dev.kvflux.tools.repro;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.Polls;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.serving.config.Durations;
import dev.kvflux.tools.Stats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/**
 * The seed's experiment: for each strategy, {@code requests} times, post one request's layers (one
 * batch per layer, after each layer's event) and time the strategy's wait over their statuses, in real
 * time, from the end of posting to the wait's end, as the seed's reproducer does.
 */
public final class ReproRun {

    /** One strategy and how many waits to time with it. */
    public record Plan(String strategy, int requests) {
        public Plan {
            ReproStrategy.named(strategy);
            if (requests < 1) {
                throw new IllegalArgumentException("requests must be at least 1, got " + requests);
            }
        }
    }

    /** One timed wait: seconds, statuses succeeded at its end, its error if it failed, the target's extras. */
    public record Wait(double seconds, int succeeded, int total, String error, Map<String, Object> extras) {
        public boolean failed() {
            return error != null;
        }
    }

    /** Every wait of one strategy. */
    public record StrategyResult(String strategy, List<Wait> waits) {
        public double median() {
            return Stats.median(seconds());
        }

        public double min() {
            return Stats.min(seconds());
        }

        public double max() {
            return Stats.max(seconds());
        }

        public int statusesSucceeded() {
            return waits.stream().mapToInt(Wait::succeeded).sum();
        }

        public int statusesTotal() {
            return waits.stream().mapToInt(Wait::total).sum();
        }

        public long failedWaits() {
            return waits.stream().filter(Wait::failed).count();
        }

        private double[] seconds() {
            return waits.stream().mapToDouble(Wait::seconds).toArray();
        }
    }

    /** The whole run. */
    public record Result(String backend, ReproGeometry geometry, ReproSettings settings,
                         List<StrategyResult> strategies) {
    }

    /** Told about each wait while the run goes on; called on the running thread or a timer thread. */
    public interface Progress {
        /** About every second while a wait runs. */
        default void waiting(String strategy, int request, int requests, Duration elapsed) {
        }

        /** When a wait ended. */
        default void waited(String strategy, int request, int requests, Wait wait) {
        }
    }

    private ReproRun() {
    }

    /**
     * Runs every plan on one target of {@code backend}, one wait at a time; blocks the calling thread
     * (never call it on a non-blocking Reactor thread).
     */
    public static Result run(ReproBackend backend, ReproGeometry geometry, ReproSettings settings, List<Plan> plans,
                             Progress progress) {
        Objects.requireNonNull(progress, "progress");
        List<StrategyResult> results = new ArrayList<>();
        try (ReproTarget target = backend.open(geometry, settings)) {
            for (Plan plan : plans) {
                WaitStrategy strategy = ReproStrategy.named(plan.strategy()).wait(target.engine(), settings.transferTimeout(),
                        settings.slice());
                List<Wait> waits = new ArrayList<>();
                for (int r = 0; r < plan.requests(); r++) {
                    Wait wait = timeOne(target, geometry, settings, strategy, plan, r, progress);
                    waits.add(wait);
                    progress.waited(plan.strategy(), r, plan.requests(), wait);
                }
                results.add(new StrategyResult(plan.strategy(), List.copyOf(waits)));
            }
        }
        return new Result(backend.name(), geometry, settings, List.copyOf(results));
    }

    private static Wait timeOne(ReproTarget target, ReproGeometry geometry, ReproSettings settings,
                                WaitStrategy strategy, Plan plan, int request, Progress progress) {
        TransferSession session = target.session();
        List<TransferStatus> statuses = new ArrayList<>(geometry.layers());
        Duration eventTimeout = settings.transferTimeout();
        for (int layer = 0; layer < geometry.layers(); layer++) {
            int l = layer;
            Polls.layerReady(target.layerEvent(request, layer))
                    .timeout(eventTimeout)
                    .onErrorMap(TimeoutException.class, e -> new IllegalStateException("layer " + l + "'s event of "
                            + plan.strategy() + " request " + request + " was not ready after "
                            + Durations.format(eventTimeout) + " (the transfer timeout); the target's layer events"
                            + " must turn ready"))
                    .block();
            statuses.add(session.batchWrite(geometry.plan(layer), session.allocateTransferUid()));
        }
        long start = System.nanoTime();
        Disposable ticker = Flux.interval(Duration.ofSeconds(1)).subscribe(tick -> progress.waiting(
                plan.strategy(), request, plan.requests(), Duration.ofNanos(System.nanoTime() - start)));
        String error = null;
        try {
            strategy.await(statuses).block();
        } catch (RuntimeException e) {
            error = e.getMessage();
        } finally {
            ticker.dispose();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        int succeeded = (int) statuses.stream().filter(s -> s.code() == StatusCode.SUCCESS).count();
        return new Wait(seconds, succeeded, statuses.size(), error, Map.copyOf(target.afterWait(request)));
    }
}
