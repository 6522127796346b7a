package dev.kvflux.examples.webflux;

import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.examples.webflux.TransferContext.WaitReport;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitStrategy;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.observability.SignalListenerFactory;
import reactor.core.observability.micrometer.Micrometer;
import reactor.core.publisher.Mono;

/**
 * A wait strategy that observes another one with Reactor's Micrometer listener:
 * {@code tap(Micrometer.metrics(registry))} on each wait, whose publisher kvflux names {@code kvflux.wait}
 * and tags {@code strategy} and {@code fail_mode}, gives the timer {@code kvflux.wait.flow.duration} (by
 * status and exception) and the counter {@code kvflux.wait.subscribed}. It also reads the
 * {@link WaitReport} from the subscriber's Context and reports a failed wait's kind there; its log lines
 * carry the transfer id through the MDC ({@link TransferIdMdc}). Emits what the wrapped wait emits.
 */
public final class MeteredWait implements WaitStrategy {
    private static final Logger LOG = LoggerFactory.getLogger(MeteredWait.class);

    private final WaitStrategy wait;
    private final MeterRegistry registry;
    private final SignalListenerFactory<Void, ?> metrics;

    public MeteredWait(WaitStrategy wait, MeterRegistry registry) {
        this.wait = Objects.requireNonNull(wait, "wait");
        this.registry = Objects.requireNonNull(registry, "registry");
        this.metrics = Micrometer.metrics(registry);
    }

    @Override
    public String strategyName() {
        return wait.strategyName();
    }

    /** The wrapped wait reporting to {@code recorder}, observed as this one is. */
    @Override
    public WaitStrategy recorder(WaitRecorder recorder) {
        return new MeteredWait(wait.recorder(recorder), registry);
    }

    @Override
    public Mono<Void> await(List<? extends TransferStatus> statuses) {
        return Mono.deferContextual(context -> {
            LOG.debug("waiting for {} statuses with {}", statuses.size(), wait);
            return wait.await(statuses)
                    .doOnError(TransferException.class, e -> {
                        LOG.info("wait ended {}: {}", e.kind(), e.getMessage());
                        context.<WaitReport>getOrEmpty(WaitReport.class).ifPresent(report -> report.failed(e.kind()));
                    })
                    // Inside the deferral, so the listener finds the name and tags of kvflux's wait publisher.
                    .tap(metrics);
        });
    }

    @Override
    public String toString() {
        return "MeteredWait[" + wait + "]";
    }
}
