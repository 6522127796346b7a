package dev.kvflux.transfer;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.TransferException;
import dev.kvflux.operators.WaitStrategy;
import dev.kvflux.pipeline.ReadBarrier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Decode's reads of one transfer in READ mode: one {@code batch_read} per layer, and each layer handed to its step
 * only once its own {@link ReadBarrier} has passed, as vLLM's MoRIIO connector waits per layer before attention.
 *
 * <p>{@link #read} posts every layer's reads when subscribed (in layer order, as the KV is wanted) and emits the
 * layer numbers 0, 1, … as each layer's reads have all succeeded, all of them within one transfer timeout of
 * being posted, so a subscriber that runs layer {@code l}'s step
 * on {@code l} never starts it before that layer's KV is in place. When a read fails, or is still in flight at the
 * transfer timeout, or a post throws, the {@code Flux} errors with a {@link TransferException} that names the layer
 * and carries the read's status code, but only once no read of the transfer, of any layer, is still in flight
 * (each barrier drains, and so does the rest of the transfer), so decode never reuses a buffer a read still writes
 * into. {@code whenDrained} runs once that is so, whichever way the reads end, cancellation included (then on the
 * scheduler, once the reads in flight have drained or the transfer timeout has passed; it is not run when they
 * are still in flight then, and the caller's blocks must stay held). Either way the statuses are closed, releasing
 * what the engine keeps for them.
 *
 * <p>Usable on its own: give it a session into prefill's memory and one plan per layer.
 */
public final class LayerReads {
    private static final Logger LOG = LoggerFactory.getLogger(LayerReads.class);

    private final WaitStrategy drain;
    private final Duration transferTimeout;

    private LayerReads(WaitStrategy drain, Duration transferTimeout) {
        this.drain = drain;
        this.transferTimeout = transferTimeout;
    }

    /** Reads bounded by {@code transferTimeout} per layer (and for the drain after a failure). */
    public static LayerReads of(Duration transferTimeout) {
        CompletionWait wait = CompletionWait.drain(transferTimeout);
        return new LayerReads(wait, wait.transferTimeout());
    }

    /**
     * Reads over a given drain wait (its slice, its scheduler).
     *
     * @throws IllegalArgumentException if {@code wait} fails fast (see {@link ReadBarrier#using})
     */
    public static LayerReads using(CompletionWait wait) {
        ReadBarrier.using(wait); // the same check, with its message
        return new LayerReads(wait, wait.transferTimeout());
    }

    /**
     * Reads over a push wait, for an engine whose reads push completion: each layer is handed on as soon as its
     * reads are pushed, with no poll.
     *
     * @throws IllegalArgumentException if {@code wait} fails fast: the reads must drain, as a {@link ReadBarrier}'s
     */
    public static LayerReads using(PushWait wait) {
        Objects.requireNonNull(wait, "wait");
        if (wait.mode() != FailMode.DRAIN) {
            throw new IllegalArgumentException("READ mode's reads must drain (PushWait.drain(...)), got " + wait
                    + "; failing fast would let decode reuse buffers that reads still write into");
        }
        return new LayerReads(wait, wait.transferTimeout());
    }

    /** The drain wait the layers' barriers, the transfer timeout and the drain after a failure use. */
    public WaitStrategy waitStrategy() {
        return drain;
    }

    /**
     * Reads a transfer's layers through {@code session} (see the class comment).
     *
     * @param plans one plan per layer, in layer order: local offsets in decode's blocks, remote ones in prefill's
     * @param transferUid the engine's id for the transfer's copies
     * @param whenDrained run once nothing the reads posted is in flight any more
     */
    public Flux<Integer> read(TransferSession session, List<BatchPlan> plans, long transferUid, Runnable whenDrained) {
        return read(session, plans, transferUid, whenDrained, () -> { });
    }

    /**
     * As {@link #read(TransferSession, List, long, Runnable)}; {@code whenSettled} runs once the reads have ended
     * and their drain is over, whether they drained or stalled (after {@code whenDrained} when they drained): then
     * nothing more is posted through {@code session}, and the caller may give it back.
     */
    public Flux<Integer> read(TransferSession session, List<BatchPlan> plans, long transferUid, Runnable whenDrained,
            Runnable whenSettled) {
        Objects.requireNonNull(session, "session");
        Objects.requireNonNull(whenDrained, "whenDrained");
        Objects.requireNonNull(whenSettled, "whenSettled");
        List<BatchPlan> layers = List.copyOf(plans);
        return Flux.defer(() -> {
            List<TransferStatus> posted = new ArrayList<>(layers.size());
            AtomicBoolean drained = new AtomicBoolean();
            AtomicBoolean settled = new AtomicBoolean();
            Runnable settle = () -> {
                if (settled.compareAndSet(false, true)) {
                    whenSettled.run();
                }
            };
            Runnable once = () -> {
                if (drained.compareAndSet(false, true)) {
                    Statuses.close(posted);
                    whenDrained.run();
                }
            };
            TransferException postFailed = null;
            for (int l = 0; l < layers.size(); l++) {
                try {
                    posted.add(session.batchRead(layers.get(l), transferUid));
                } catch (RuntimeException e) {
                    postFailed = new TransferException(StatusCode.ERR_BAD_STATE, "layer " + l + "'s reads could not be"
                            + " posted: " + e.getMessage());
                    break;
                }
            }
            if (postFailed != null) {
                return drainThen(posted, once, settle).then(Mono.error(postFailed));
            }
            // every read is posted now: the transfer timeout bounds them all from here, as it bounds a WRITE's
            // statuses once posted, while each layer is handed on as soon as its own reads are through
            // whichever wait sees a failure first names the layer it struck
            Mono<Integer> allWithinTimeout = drain.await(posted)
                    .onErrorMap(TransferException.class, e -> atLayer(e, posted))
                    .then(Mono.empty());
            return Flux.range(0, layers.size())
                    .concatMap(l -> drain.await(List.of(posted.get(l)))
                            .onErrorMap(TransferException.class, e -> new TransferException(e.code(),
                                    "layer " + l + " of " + layers.size() + ": " + e.reason()))
                            .thenReturn(l))
                    .mergeWith(allWithinTimeout)
                    .doOnComplete(() -> {
                        once.run();
                        settle.run();
                    })
                    .onErrorResume(e -> drainThen(posted, once, settle).then(Mono.error(e)))
                    .doOnCancel(() -> drainThen(posted, once, settle).subscribe());
        });
    }

    /**
     * {@code e} naming the layer it struck: the first whose reads failed, else the first still in flight (a timeout).
     */
    private static TransferException atLayer(TransferException e, List<TransferStatus> posted) {
        int failed = -1;
        int running = -1;
        for (int l = 0; l < posted.size(); l++) {
            StatusCode code;
            try {
                code = posted.get(l).code();
            } catch (RuntimeException broken) {
                code = StatusCode.IN_PROGRESS;
            }
            if (code.isFailure() && failed < 0) {
                failed = l;
            } else if (!code.isTerminal() && running < 0) {
                running = l;
            }
        }
        int layer = failed >= 0 ? failed : running;
        return layer < 0 ? e : new TransferException(e.code(), "layer " + layer + " of " + posted.size() + ": "
                + e.reason());
    }

    /**
     * Waits until nothing in {@code posted} is in flight (or the timeout), then runs {@code once} if so, and
     * {@code settle} either way.
     */
    private Mono<Void> drainThen(List<TransferStatus> posted, Runnable once, Runnable settle) {
        if (posted.isEmpty()) {
            once.run();
            settle.run();
            return Mono.empty();
        }
        return drain.await(posted)
                .onErrorResume(e -> Mono.empty())
                .then(Mono.fromRunnable(() -> {
                    if (Statuses.inFlight(posted)) {
                        // stalled: nothing will query them again, so the engine's handles go now, while the
                        // blocks they may still write into stay held (the caller's lease frees them)
                        Statuses.close(posted);
                        LOG.warn("reads still in flight {} after their transfer failed; their blocks stay held",
                                DurationText.of(transferTimeout));
                    } else {
                        once.run();
                    }
                    settle.run();
                }));
    }

    @Override
    public String toString() {
        return "LayerReads[" + drain + "]";
    }
}
