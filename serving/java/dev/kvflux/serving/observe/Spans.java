package dev.kvflux.serving.observe;

import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.Kind;
import io.micrometer.observation.transport.ReceiverContext;
import io.micrometer.observation.transport.SenderContext;
import io.micrometer.tracing.handler.TracingObservationHandler;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.HashMap;
import java.util.Map;
import reactor.core.publisher.Mono;

/**
 * The observations of one transfer, each started here and stopped by its caller. Every one is tagged with
 * the transfer id ({@value #TRANSFER_ID_TAG}, high cardinality: spans only). With
 * {@link ObservationRegistry#NOOP} (or a registry without handlers) each is a no-op that records and
 * propagates nothing.
 */
public final class Spans {
    /** The tag that names a span's transfer. */
    public static final String TRANSFER_ID_TAG = "kvflux.transfer_id";
    /** The W3C header and notify frame key of the trace context. */
    public static final String TRACEPARENT = "traceparent";

    private Spans() {
    }

    /** A request that came over HTTP, continuing the trace of its {@code traceparent} header if it has one. */
    public static Observation server(ObservationRegistry registry, String name, String transferId,
            HttpHeaders headers) {
        ReceiverContext<HttpHeaders> context = new ReceiverContext<>(HttpHeaders::get, Kind.SERVER);
        context.setCarrier(headers);
        return Observation.createNotStarted(name, () -> context, registry)
                .highCardinalityKeyValue(TRANSFER_ID_TAG, transferId).start();
    }

    /**
     * A message that came with {@code traceparent} (null: none, the observation starts a trace of its own),
     * continuing the sender's trace.
     */
    public static Observation received(ObservationRegistry registry, String name, String transferId,
            String traceparent) {
        ReceiverContext<String> context = new ReceiverContext<>(
                (carrier, key) -> TRACEPARENT.equals(key) ? carrier : null, Kind.CONSUMER);
        context.setCarrier(traceparent);
        return Observation.createNotStarted(name, () -> context, registry)
                .highCardinalityKeyValue(TRANSFER_ID_TAG, transferId).start();
    }

    /** A step of {@code parent}'s work. */
    public static Observation child(ObservationRegistry registry, String name, String transferId, Observation parent) {
        return Observation.createNotStarted(name, registry).parentObservation(parent)
                .highCardinalityKeyValue(TRANSFER_ID_TAG, transferId).start();
    }

    /**
     * {@code work} as a step of {@code parent}'s: the step starts when {@code work} is subscribed and ends when
     * it completes, errors (recording the error) or is cancelled.
     */
    public static <T> Mono<T> during(ObservationRegistry registry, String name, String transferId,
            Observation parent, Mono<T> work) {
        return Mono.usingWhen(Mono.fromSupplier(() -> child(registry, name, transferId, parent)),
                step -> work,
                step -> Mono.fromRunnable(step::stop),
                (step, error) -> Mono.fromRunnable(() -> {
                    step.error(error);
                    step.stop();
                }),
                step -> Mono.fromRunnable(step::stop));
    }

    /**
     * A call or message to another process on behalf of {@code parent}; its trace context, for the peer, is
     * {@link #traceparent(Observation)}.
     */
    public static Observation sent(ObservationRegistry registry, String name, String transferId, Observation parent,
            Kind kind) {
        SenderContext<Map<String, String>> context = new SenderContext<>(
                (carrier, key, value) -> carrier.put(key, value), kind);
        context.setCarrier(new HashMap<>());
        return Observation.createNotStarted(name, () -> context, registry).parentObservation(parent)
                .highCardinalityKeyValue(TRANSFER_ID_TAG, transferId).start();
    }

    /** The traceparent a {@link #sent} observation passes to its peer; null when it is not traced. */
    public static String traceparent(Observation sent) {
        if (sent.getContext() instanceof SenderContext<?> context && context.getCarrier() instanceof Map<?, ?> carrier
                && carrier.get(TRACEPARENT) instanceof String value) {
            return value;
        }
        return null;
    }

    /** The observation's trace id (32 hex), or null when it is not traced. */
    public static String traceId(Observation observation) {
        if (observation.isNoop()) {
            return null;
        }
        TracingObservationHandler.TracingContext tracing =
                observation.getContext().get(TracingObservationHandler.TracingContext.class);
        return tracing == null || tracing.getSpan() == null ? null : tracing.getSpan().context().traceId();
    }
}
