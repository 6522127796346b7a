package dev.kvflux.pipeline;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.Polls;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitRecorder;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.WriteOutcome.WriteDone;
import dev.kvflux.pipeline.WriteOutcome.WriteFailed;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The prefill side's WRITE path: for each request, every layer's GPU event, then that layer's
 * {@code batchWrite}, then, once the request is sealed and its last layer posted, one completion wait
 * over all its statuses, then exactly one {@link WriteOutcome}.
 *
 * <h2>What {@link #write} emits</h2>
 * One {@link WriteDone} when every status succeeded, or one {@link WriteFailed}; never an error, never
 * empty (unless cancelled). The failure's code and reason:
 * <ul>
 *   <li>the wait's {@link TransferException}: the failed status's code and message, or IN_PROGRESS with
 *       {@code RDMA transfer timed out after 30s};</li>
 *   <li>a layer's event failed, or was not ready within the event timeout: ERR_GPU_OP;</li>
 *   <li>a layer's block plan runs past a buffer: ERR_INVALID_ARGS;</li>
 *   <li>a layer's {@code batchWrite} returned {@code null} instead of a status (nothing shows the layer was
 *       posted, so the request can never be known done): ERR_BAD_STATE, with a reason naming the layer;</li>
 *   <li>the layer stream itself failed, or went the layer timeout (2 min by default) without a layer
 *       or its completion (a request never sealed): ERR_BAD_STATE;</li>
 *   <li>anything else: ERR_BAD_STATE.</li>
 * </ul>
 * A wait that fails fast stops the request at its first failure; statuses already posted are left to
 * the engine. With the default {@code CompletionWait.failFast(30s)} the outcome comes within the
 * transfer timeout plus one slice of the last layer's post (of sealing, when the events are ready by
 * then).
 *
 * <h2>Concurrency</h2>
 * Layers of one request are posted in order. Requests run independently: one request's wait, even one
 * that runs to its timeout, delays no other request's outcome. At most {@code maxInFlight} requests
 * run at once; the others wait in arrival order, whether they came through {@link #write} or
 * {@link #writeAll}. {@code maxInFlight(1)} gives vLLM's single serial write worker, for comparison.
 * A request holds its place from its start until its outcome is out or it is cancelled; cancelled while
 * waiting, it leaves the queue. The subscriber's {@code Context} reaches everything a request runs (the
 * layer stream, the wait strategy), queued or not, so {@code write(request).contextWrite(...)} can carry a
 * transfer id to logs and metrics.
 * Event polls and their timeouts run on the scheduler ({@link Schedulers#parallel()} unless set, looked
 * up at subscription); the wait runs where its strategy runs it.
 */
public final class WritePipeline {
    private static final Logger LOG = LoggerFactory.getLogger(WritePipeline.class);

    private final WaitStrategy waitStrategy;
    private final int maxInFlight;
    private final Duration eventPollPeriod;
    private final Duration eventTimeout;
    private final Duration layerTimeout;
    private final Scheduler scheduler;
    private final InFlightGate gate;
    /** The transfer ids being written now: a second write of one of them posts nothing. */
    private final Set<String> writing = ConcurrentHashMap.newKeySet();

    private WritePipeline(Builder b) {
        this.waitStrategy = b.recorder != null ? b.waitStrategy.recorder(b.recorder) : b.waitStrategy;
        this.maxInFlight = b.maxInFlight;
        this.eventPollPeriod = b.eventPollPeriod;
        this.eventTimeout = b.eventTimeout;
        this.layerTimeout = b.layerTimeout;
        this.scheduler = b.scheduler;
        this.gate = new InFlightGate(b.maxInFlight);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A pipeline with the defaults: {@code CompletionWait.failFast(30s)}, 64 requests in flight. */
    public static WritePipeline create() {
        return builder().build();
    }

    /** The wait strategy requests use, with the builder's {@linkplain Builder#recorder recorder} if one was set. */
    public WaitStrategy waitStrategy() {
        return waitStrategy;
    }

    public int maxInFlight() {
        return maxInFlight;
    }

    /** Requests running now (holding one of the {@code maxInFlight} places). */
    public int requestsInFlight() {
        return gate.active();
    }

    /** Requests waiting for a place. */
    public int requestsQueued() {
        return gate.waiting();
    }

    /**
     * The request's one outcome (see the class comment). Nothing happens until subscribed; each subscription
     * writes the request. A subscription while the same transfer id is being written (a second subscriber, a
     * {@code repeat()}) posts nothing and ends at once in {@link WriteFailed} ERR_BAD_STATE saying so, so no layer
     * is posted twice at the same time; once the first outcome is out the id may be written again.
     */
    public Mono<WriteOutcome> write(WriteRequest request) {
        Objects.requireNonNull(request, "request");
        String id = request.transferId();
        return Mono.defer(() -> {
            if (!writing.add(id)) {
                return Mono.just((WriteOutcome) new WriteFailed(id, StatusCode.ERR_BAD_STATE, "transfer " + id
                        + " is already being written by this pipeline; subscribe to its write once (cache() the"
                        + " outcome to share it)"));
            }
            return gate.run(Mono.defer(() -> run(request))).doFinally(signal -> writing.remove(id));
        });
    }

    /**
     * One outcome per request, in the order they end (not the order they came). Completes when
     * {@code requests} has completed and every outcome is out; an error of {@code requests} itself is
     * passed on after the outcomes of the requests already taken.
     */
    public Flux<WriteOutcome> writeAll(Flux<WriteRequest> requests) {
        return requests.flatMap(this::write, maxInFlight, 1);
    }

    private Mono<WriteOutcome> run(WriteRequest request) {
        Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
        String id = request.transferId();
        return request.layers()
                .timeout(layerTimeout, Mono.error(() -> new TransferException(StatusCode.ERR_BAD_STATE,
                        "the layer stream of transfer " + id + " gave no layer and did not complete for "
                                + DurationText.of(layerTimeout) + "; complete it once the last layer is out")), on)
                .onErrorMap(e -> !(e instanceof TransferException), e -> new TransferException(StatusCode.ERR_BAD_STATE,
                        "the layer stream of transfer " + id + " failed: " + e))
                // Layers are taken as they come, so the silence above is the producer's, not our posting's.
                .onBackpressureBuffer()
                .concatMap(layer -> post(request, layer, on))
                .collectList()
                .flatMap(statuses -> waitStrategy.await(statuses))
                .thenReturn((WriteOutcome) new WriteDone(id))
                .onErrorResume(e -> Mono.just(failed(id, e)))
                .doOnNext(outcome -> LOG.debug("transfer {}: {}", id, outcome));
    }

    private Mono<TransferStatus> post(WriteRequest request, LayerWrite layer, Scheduler on) {
        return Polls.layerReady(layer.event(), eventPollPeriod, eventTimeout, on)
                .onErrorMap(e -> new TransferException(StatusCode.ERR_GPU_OP, "layer " + layer.layer()
                        + "'s event " + (e.getCause() instanceof TimeoutException
                                ? "was not ready after " + DurationText.of(eventTimeout) : "failed: " + e.getMessage())))
                .then(Mono.fromCallable(() -> {
                    TransferStatus status;
                    try {
                        status = request.session().batchWrite(layer.plan(), request.session().allocateTransferUid());
                    } catch (IllegalArgumentException e) {
                        throw new TransferException(StatusCode.ERR_INVALID_ARGS,
                                "layer " + layer.layer() + ": " + e.getMessage());
                    }
                    if (status == null) {
                        throw new TransferException(StatusCode.ERR_BAD_STATE, "layer " + layer.layer()
                                + "'s batchWrite returned no status (null), so nothing shows that its copies were"
                                + " posted; the transfer session broke its contract");
                    }
                    return status;
                }));
    }

    private static WriteFailed failed(String id, Throwable e) {
        if (e instanceof TransferException t) {
            return new WriteFailed(id, t.code(), t.reason(), t.kind());
        }
        return new WriteFailed(id, StatusCode.ERR_BAD_STATE, String.valueOf(e));
    }

    /** Settings for a {@link WritePipeline}. */
    public static final class Builder {
        private static final Duration DEFAULT_EVENT_TIMEOUT = Duration.ofSeconds(30);
        private static final Duration DEFAULT_LAYER_TIMEOUT = Duration.ofMinutes(2);

        private WaitStrategy waitStrategy = CompletionWait.failFast(Duration.ofSeconds(30));
        private int maxInFlight = 64;
        private Duration eventPollPeriod = Polls.DEFAULT_EVENT_POLL;
        private Duration eventTimeout = DEFAULT_EVENT_TIMEOUT;
        private Duration layerTimeout = DEFAULT_LAYER_TIMEOUT;
        private Scheduler scheduler;
        private WaitRecorder recorder;

        private Builder() {
        }

        /**
         * Where every request's wait reports (see {@link WaitRecorder}): the wait strategy is used as
         * {@code waitStrategy.recorder(recorder)}, whichever strategy is set, before or after this call.
         * Unset, the strategy keeps the recorder it came with ({@link WaitRecorder#NOOP} by default). The
         * pipeline's own figures, {@link WritePipeline#requestsInFlight()} and
         * {@link WritePipeline#requestsQueued()}, can be read by gauges.
         */
        public Builder recorder(WaitRecorder recorder) {
            this.recorder = Objects.requireNonNull(recorder, "recorder");
            return this;
        }

        /** How a sealed request waits for its statuses; default {@code CompletionWait.failFast(30s)}. */
        public Builder waitStrategy(WaitStrategy waitStrategy) {
            this.waitStrategy = Objects.requireNonNull(waitStrategy, "waitStrategy");
            return this;
        }

        /**
         * The most requests running at once (default 64); more wait their turn.
         *
         * @throws IllegalArgumentException if {@code maxInFlight} is under 1
         */
        public Builder maxInFlight(int maxInFlight) {
            if (maxInFlight < 1) {
                throw new IllegalArgumentException("maxInFlight must be at least 1, got " + maxInFlight
                        + "; 1 writes one request at a time, as vLLM's write worker does");
            }
            this.maxInFlight = maxInFlight;
            return this;
        }

        /** How often a layer's event is queried until ready (default {@link Polls#DEFAULT_EVENT_POLL}, 1 ms). */
        public Builder eventPollPeriod(Duration eventPollPeriod) {
            this.eventPollPeriod = positive(eventPollPeriod, "event poll period", Polls.DEFAULT_EVENT_POLL);
            return this;
        }

        /**
         * How long a layer's event may stay not ready once the previous layer is posted (default 30 s);
         * past it the request fails with ERR_GPU_OP.
         */
        public Builder eventTimeout(Duration eventTimeout) {
            this.eventTimeout = positive(eventTimeout, "event timeout", DEFAULT_EVENT_TIMEOUT);
            return this;
        }

        /**
         * How long a request's layer stream may go without a layer or its completion, from subscription
         * or from its last layer (default 2 min): past it the request fails with ERR_BAD_STATE, so a
         * request that is never sealed still gets its outcome and gives its place back.
         */
        public Builder layerTimeout(Duration layerTimeout) {
            this.layerTimeout = positive(layerTimeout, "layer timeout", DEFAULT_LAYER_TIMEOUT);
            return this;
        }

        /** Where event polls and their timeouts run; default {@link Schedulers#parallel()}. */
        public Builder scheduler(Scheduler scheduler) {
            this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
            return this;
        }

        public WritePipeline build() {
            return new WritePipeline(this);
        }

        private static Duration positive(Duration d, String what, Duration byDefault) {
            Objects.requireNonNull(d, what);
            if (d.isZero() || d.isNegative()) {
                throw new IllegalArgumentException(what + " must be positive, got " + DurationText.of(d) + "; the default is "
                        + DurationText.of(byDefault));
            }
            return d;
        }
    }
}
