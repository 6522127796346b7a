package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.sim.SimulatedLayerEvent;
import dev.kvflux.pipeline.WriteOutcome;
import dev.kvflux.serving.api.CompletionSchema;
import dev.kvflux.serving.api.RequestGate;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.observe.Handover;
import dev.kvflux.serving.observe.Spans;
import dev.kvflux.serving.observe.Step;
import dev.kvflux.transfer.LogContext;
import dev.kvflux.transfer.PrefillRanks;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.transfer.PrefillTransfer;
import dev.kvflux.transfer.TransferRefusedException;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.Kind;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * Prefill's {@code POST /v1/completions}: opens the request's transfer on each of prefill's ranks
 * ({@link PrefillRanks}; refusals are answered at once, a decode of another TP size than {@code --peer-tp} with 400
 * {@code tp_mismatch}), queues its prompt on the {@linkplain PrefillLoop simulated model}, and when the prompt's last
 * step is queued writes its layers, each layer's event turning ready in turn across the step. The HTTP answer
 * (one token) comes when prefill ends; the write's outcome goes to decode through the side. A request that is
 * cancelled (its client or the proxy gave up) aborts its transfer. Each request is span
 * {@code kvflux.prefill.request} with children {@code kvflux.prefill.queue}, {@code .post}, {@code .wait} and
 * {@code kvflux.notify.send}.
 */
final class PrefillCompletions {
    private final ServingModel model;
    /** Each rank's KV memory: its bytes, where the engine's memory holds them, and its GPU forward pass. */
    private final List<RoleMemory> memories;
    private final PrefillRanks ranks;
    private final TpRanks pair;
    private final PrefillLoop loop;
    private final PrefillStats stats;
    private final ObservationRegistry observations;
    private final RoleFront front;
    private final ClientShares shares;
    private final int maxModelLen;
    private final Handover handover;
    /** Each transfer's copied bytes over the time from its first post to its last copy's end. */
    private final DistributionSummary throughput;
    private volatile boolean closing;

    PrefillCompletions(ServingModel model, PrefillRanks ranks, TpRanks pair, PrefillLoop loop, PrefillStats stats,
            List<RoleMemory> memories, ObservationRegistry observations, RoleFront front, ClientShares shares,
            int maxModelLen, Handover handover) {
        this.handover = handover;
        this.throughput = stats.throughput();
        this.shares = shares;
        this.memories = List.copyOf(memories);
        this.ranks = ranks;
        this.pair = pair;
        this.front = front;
        this.maxModelLen = maxModelLen;
        this.model = model;
        this.loop = loop;
        this.stats = stats;
        this.observations = observations;
    }

    /** Refuses new prompts from now on. */
    void closing() {
        closing = true;
    }

    Publisher<Void> serve(HttpServerRequest request, HttpServerResponse response) {
        boolean chat = request.fullPath().endsWith("/chat/completions");
        String requestId = request.requestHeaders().get("X-Request-Id");
        return front.withBody(request, response, passed -> {
            String signedFor = passed.signedFor();
            CompletionRequest parsed;
            try {
                parsed = CompletionRequest.parse(CompletionSchema.parse(passed.body(), maxModelLen), Role.PREFILL,
                        maxModelLen, chat, requestId);
            } catch (CompletionSchema.ModelLengthException e) {
                return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST,
                        "invalid_request_error", "context_length_exceeded", e.getMessage()));
            } catch (IllegalArgumentException e) {
                return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST,
                        "invalid_request_error", "bad_request", e.getMessage()));
            }
            String id = parsed.params().transferId();
            if (signedFor != null && !signedFor.equals(id)) {
                return front.gate().mismatched(response, signedFor, id);
            }
            Observation span = Spans.server(observations, "kvflux.prefill.request", id, request.requestHeaders());
            String traceId = Spans.traceId(span);
            try (LogContext.Scope _ = LogContext.open(id, traceId)) {
                return admit(parsed, passed.client(), new Traced(id, span, traceId, handover.begin(id)), response)
                        .doOnError(span::error)
                        .doFinally(signal -> span.stop())
                        .contextWrite(LogContext.context(id, traceId));
            }
        });
    }

    /** Takes the request in, or refuses it at once; the request's answer. */
    private Mono<Void> admit(CompletionRequest parsed, String client, Traced traced, HttpServerResponse response) {
        String id = parsed.params().transferId();
        if (closing) {
            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                    "prefill_shutting_down", "prefill is shutting down and takes no new prompts; retry on"
                            + " another prefill instance"));
        }
        int decodeTp = parsed.params().remoteNotifyRanks().size();
        if (decodeTp != pair.decodeTp()) {
            return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                    "tp_mismatch", "this request's decode runs " + decodeTp + " rank(s); this prefill's KV is cut for"
                            + " decodes of " + pair.decodeTp() + " (--peer-tp); route it to a prefill started for that"
                            + " TP size"));
        }
        // link 0 carries the request's spans; every link's observer closes its own GPU events
        Traced[] linkObservers = new Traced[pair.links()];
        linkObservers[0] = traced;
        for (int k = 1; k < linkObservers.length; k++) {
            linkObservers[k] = new Traced(id, Observation.NOOP, traced.traceId, Handover.NONE.begin(id));
        }
        int blocks = model.blocksFor(parsed.promptTokens());
        if (!shares.tryTake(client, blocks)) {
            return Mono.from(overShare(response, shares.refusal(blocks)));
        }
        PrefillRanks.Transfer t;
        try {
            t = ranks.open(id, parsed.params().remoteNotifyRanks(), blocks, link -> linkObservers[link]);
        } catch (TransferRefusedException e) {
            shares.give(client, blocks);
            return Mono.from(refused(response, id, e));
        } catch (IllegalArgumentException e) {
            shares.give(client, blocks);
            return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                    "bad_request", e.getMessage()));
        } catch (RuntimeException e) {
            shares.give(client, blocks);
            throw e;
        }
        Mono<Void> prefilled;
        try {
            traced.queue = Step.of(Spans.child(observations, "kvflux.prefill.queue", id, traced.span));
            // before the prompt is queued: an idle loop may run its step, and post its layers, before submit returns
            traced.marks.reached(Handover.Stage.PREFILL_ADMITTED);
            prefilled = loop.submit(client, parsed.promptTokens(), (startsIn, length) -> startWrite(t, linkObservers,
                    startsIn, length));
        } catch (PrefillLoop.QueueFullException e) {
            stats.refusedQueueFull.increment();
            t.close();
            shares.give(client, blocks);
            return Mono.from(HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                    "prefill_queue_full", e.getMessage()));
        } catch (PrefillLoop.ClientOverShareException e) {
            stats.refusedClientShare.increment();
            t.close();
            shares.give(client, blocks);
            return Mono.from(overShare(response, e.getMessage()));
        }
        stats.requests.increment();
        // Whichever comes first: the prompt's last step ends, or the transfer is aborted (which cancels the
        // prompt). The request's own cancellation (client or proxy gone) aborts it.
        return Mono.firstWithSignal(prefilled.thenReturn(""), t.aborted().doOnNext(t::abort))
                .doOnCancel(() -> t.abort("prefill's HTTP request was cancelled: the client or the proxy gave up"))
                .doOnError(e -> t.abort("prefill could not start its write: " + e.getMessage()))
                .flatMap(aborted -> aborted.isEmpty()
                        ? Mono.from(HttpJson.reply(response, HttpResponseStatus.OK, Answers.firstToken(parsed,
                                model.name(), ranks.ranks().getFirst().notifyAddress(), pair.prefillTp())))
                        : Mono.from(HttpJson.error(response, HttpResponseStatus.CONFLICT, "kv_transfer_aborted",
                                "transfer_aborted", "transfer " + id + " was aborted: " + aborted)))
                .doFinally(signal -> shares.give(client, blocks));
    }

    private static Publisher<Void> overShare(HttpServerResponse response, String why) {
        return HttpJson.error(response, HttpResponseStatus.TOO_MANY_REQUESTS, "rate_limit_error", "client_over_share",
                why);
    }

    private static Publisher<Void> refused(HttpServerResponse response, String id, TransferRefusedException e) {
        return switch (e.reason()) {
            case DUPLICATE -> HttpJson.error(response, HttpResponseStatus.CONFLICT, "invalid_request_error",
                    "transfer_fenced", e.getMessage());
            case STALE_PEER -> HttpJson.error(response, HttpResponseStatus.CONFLICT, "kv_transfer_aborted",
                    "transfer_aborted", e.getMessage());
            case OUT_OF_BLOCKS -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                    "kv_blocks_exhausted", e.getMessage() + " (--kv-blocks)");
            case TOO_LARGE -> HttpJson.error(response, HttpResponseStatus.BAD_REQUEST, "invalid_request_error",
                    "request_too_large", e.getMessage());
            case SHUTTING_DOWN -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "unavailable",
                    "prefill_shutting_down", e.getMessage());
        };
    }

    /**
     * Called when the prompt's last prefill step is queued: its layers finish across the step, on every rank at once.
     * Where the engine's memory holds bytes, each rank's stand-in forward pass writes every layer's blocks of its
     * links first, on the prefill loop's thread (so a later owner of the same blocks writes only after it).
     */
    private void startWrite(PrefillRanks.Transfer t, Traced[] observers, Duration startsIn, Duration stepLength) {
        Traced traced = observers[0];
        traced.queue.stop();
        long forwardAt = System.nanoTime() + startsIn.toNanos();
        int links = t.links().size();
        List<List<GpuEvent>> onGpu = new ArrayList<>(links);
        try {
            for (int k = 0; k < links; k++) {
                PrefillTransfer link = t.links().get(k);
                RoleMemory memory = memories.get(t.tp().prefillRank(k));
                Traced observer = observers[k];
                List<List<GpuEvent>> written = new ArrayList<>(1);
                // only into blocks the link still holds: an abort since the step was planned may have freed them
                // for another request
                boolean held = link.whileHeld(() -> {
                    if (memory.forward() != null) {
                        List<GpuEvent> events = memory.forward().write(link.id(), link.localBlocks());
                        observer.closeWhenEnded(events);
                        written.add(events);
                    } else if (memory.bytes() != null) {
                        memory.bytes().write(link.id(), link.localBlocks());
                    }
                });
                if (!held) {
                    t.abort("link " + k + " ended before prefill's forward pass wrote its KV");
                    return;
                }
                onGpu.add(written.isEmpty() ? List.of() : written.getFirst());
            }
        } catch (RuntimeException e) {
            t.abort("prefill's forward pass could not write the KV into its memory: " + e.getMessage());
            return;
        }
        traced.forwardStarts(forwardAt);
        int layers = model.layers();
        List<LayerEvent> modelled = new ArrayList<>(layers);
        for (int l = 0; l < layers; l++) {
            modelled.add(SimulatedLayerEvent.readyAfter(Schedulers.parallel(),
                    startsIn.plus(stepLength.multipliedBy(l + 1).dividedBy(layers))));
        }
        try (LogContext.Scope _ = LogContext.open(t.id(), traced.traceId)) {
            t.write(k -> {
                List<GpuEvent> gpu = onGpu.get(k);
                if (gpu.isEmpty()) {
                    return modelled;
                }
                List<LayerEvent> both = new ArrayList<>(layers);
                for (int l = 0; l < layers; l++) {
                    both.add(GpuForward.both(modelled.get(l), gpu.get(l)));
                }
                return both;
            });
        }
    }

    /**
     * One request's spans as the transfer's observer: waiting in the prefill queue, posting the layers, the
     * completion wait, and sending the outcome (whose frame carries the traceparent).
     */
    private final class Traced implements PrefillTransfer.Observer {
        private final String id;
        private final Observation span;
        private final String traceId;
        private volatile Step queue = Step.NONE;
        private volatile Step post = Step.NONE;
        private volatile Step wait = Step.NONE;
        private volatile Observation notice = Observation.NOOP;
        private volatile List<GpuEvent> gpuEvents = List.of();
        /** The request's handover stages (the first link's alone). */
        private final Handover.Marks marks;
        /** When the forward pass over the prompt's last step starts ({@link System#nanoTime()}). */
        private volatile long forwardAt = Long.MIN_VALUE;

        Traced(String id, Observation span, String traceId, Handover.Marks marks) {
            this.marks = marks;
            this.id = id;
            this.span = span;
            this.traceId = traceId;
        }

        @Override
        public String traceId() {
            return traceId;
        }

        @Override
        public void writing() {
            post = Step.of(Spans.child(observations, "kvflux.prefill.post", id, span));
        }

        /** The forward pass over the prompt's last step starts at {@code nanoTime}, now or later. */
        void forwardStarts(long nanoTime) {
            forwardAt = nanoTime;
            marks.reached(Handover.Stage.FORWARD_STARTED, nanoTime);
        }

        @Override
        public void blockListReceived() {
            // a list that came before the forward began was waited for by no copy
            marks.reached(Handover.Stage.BLOCK_LIST_RECEIVED, Math.max(System.nanoTime(), forwardAt));
        }

        @Override
        public void posted() {
            marks.reached(Handover.Stage.LAST_LAYER_READY);
            post.stop();
            wait = Step.of(Spans.child(observations, "kvflux.prefill.wait", id, span));
        }

        @Override
        public void copied(long bytes, Duration firstPostToLastEnd, Duration sinceLastEnd) {
            marks.reached(Handover.Stage.LAST_COPY_ENDED, System.nanoTime() - sinceLastEnd.toNanos());
            if (bytes > 0 && firstPostToLastEnd.toNanos() > 0) {
                throughput.record(bytes * 1e9 / firstPostToLastEnd.toNanos());
            }
        }

        @Override
        public void written(WriteOutcome outcome) {
            if (outcome instanceof WriteOutcome.WriteDone) {
                marks.reached(Handover.Stage.WAIT_ENDED);
            }
            post.stop();
            if (outcome instanceof WriteOutcome.WriteFailed failed) {
                wait.fail(new IllegalStateException(failed.code().qualifiedName() + ": " + failed.reason()));
            } else {
                wait.stop();
            }
        }

        @Override
        public String outcomeSending() {
            notice = Spans.sent(observations, "kvflux.notify.send", id, span, Kind.PRODUCER);
            return Spans.traceparent(notice);
        }

        @Override
        public void outcomeSent(boolean delivered) {
            notice.stop();
        }

        /** The forward pass's events for this transfer, closed when it ends (nothing polls them after). */
        void closeWhenEnded(List<GpuEvent> events) {
            gpuEvents = events;
        }

        @Override
        public void ended() {
            queue.stop();
            post.stop();
            wait.stop();
            gpuEvents.forEach(GpuEvent::close);
        }
    }
}
