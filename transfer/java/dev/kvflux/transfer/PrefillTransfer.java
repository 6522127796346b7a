package dev.kvflux.transfer;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.TransferException;
import dev.kvflux.pipeline.WriteOutcome;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * One transfer on the prefill side, from {@link PrefillSide#open} until it has ended: its source blocks, the
 * decode it writes to, and the one way it ends.
 *
 * <h2>How a transfer ends (exactly once)</h2>
 * <ul>
 *   <li>Its write ends: decode is sent {@code write_done} (every copy succeeded) or {@code write_failed} (with
 *       the status code and reason), and {@link #write}'s {@code Mono} emits that outcome.</li>
 *   <li>It is aborted, by decode's {@code abort}, by {@link #abort}, because the decode it targets restarted, or
 *       because its write came after the transfer's deadline: no further layer is posted, its write stops, and
 *       {@link #aborted()} emits the reason; {@link #write}'s {@code Mono} completes empty.</li>
 *   <li>The side shuts down with the transfer still running: decode is sent {@code write_failed}
 *       ({@code ERR_BAD_STATE}, "prefill is shutting down").</li>
 *   <li>{@link #close()} before it was written (the caller gave up on it, say its prompt was refused).</li>
 * </ul>
 * Whichever way it ends, once every copy it posted is terminal (the drain, bounded by the transfer timeout) its
 * source blocks are freed and decode is sent {@code release}; if copies are still in flight at that bound the
 * blocks are freed anyway, counted ({@link PrefillRecorder.Event#STALLED_AT_RELEASE}), and decode's lease
 * reclaims its side. Its id is fenced from then on: {@link PrefillSide#open} refuses it.
 *
 * <p>Thread-safe: abort may come from any thread while the write runs. Its state changes under its own monitor,
 * and a copy is posted only while the transfer is not aborted, so once {@link #abort} has returned no further
 * layer is posted and every status posted is drained.
 */
public final class PrefillTransfer {

    /**
     * Hooks into one transfer's life, for spans and log lines; every method has a no-op default and runs on the
     * thread where the step happened, so it must be quick and must not block.
     */
    public interface Observer {
        /** Observes nothing. */
        Observer NONE = new Observer() { };

        /** The request's trace id for the side's log lines about it (MDC {@code trace_id}); null for none. */
        default String traceId() {
            return null;
        }

        /** The write started: the block list is awaited and the layers are posted as their events turn ready. */
        default void writing() {
        }

        /**
         * Decode's block list for this transfer is in hand (it says where the copies go): called once the write has
         * it, at once after {@link #writing} when it came first; never when it did not come by the transfer's
         * deadline or the transfer was aborted first.
         */
        default void blockListReceived() {
        }

        /** Every layer has been posted; the completion wait runs. */
        default void posted() {
        }

        /**
         * Every copy of a write that succeeded has ended: the copies moved {@code bytes}, the last ended
         * {@code firstPostToLastEnd} after the first was posted, and {@code sinceLastEnd} before this call (the
         * completion wait's detection lag, and the time it took to report it). Called just before
         * {@link #written} with {@code write_done}, and only when the engine tells when its copies end.
         */
        default void copied(long bytes, Duration firstPostToLastEnd, Duration sinceLastEnd) {
        }

        /** The completion wait ended with {@code outcome}. */
        default void written(WriteOutcome outcome) {
        }

        /**
         * The outcome is about to be sent to decode: the W3C traceparent its message carries, or null for none.
         * {@link #outcomeSent} follows once it was acknowledged or given up.
         */
        default String outcomeSending() {
            return null;
        }

        /** The outcome message was acknowledged by decode ({@code delivered}) or given up at its deadline. */
        default void outcomeSent(boolean delivered) {
        }

        /** The transfer has ended (its drain and release follow). */
        default void ended() {
        }
    }

    private final PrefillSide side;
    private final String id;
    private final InetSocketAddress decode;
    private final long openedNanos;
    private final long deadlineNanos;
    private final long arrivalMillis = System.currentTimeMillis();
    private final Observer observer;
    private final Sinks.One<String> abortSignal = Sinks.one();
    private final Sinks.One<WriteOutcome> outcome = Sinks.one();
    /** READ mode: decode's release, once its reads of this transfer's blocks have drained. */
    private final Sinks.Empty<Void> consumerReleased = Sinks.empty();
    private final List<TransferStatus> statuses = new ArrayList<>();
    private volatile List<Long> localBlocks = List.of();
    /** The incarnation of the decode whose blocks this transfer writes; 0 until its block list came. */
    private volatile long decodeIncarnation;
    /** Whether decode is to be sent release at the end (not when the decode it targets is gone). */
    private volatile boolean releaseDecode = true;
    /** Decode's blocks this transfer's layers are written into (empty until its block list came). */
    private volatile List<Long> decodeBlocks = List.of();
    private volatile boolean sessionTaken;
    private volatile boolean offered;
    private volatile long offeredNanos;
    private Disposable write;
    private String abortReason;
    private boolean writing;
    private boolean ended;
    /** Bytes of every batch posted, and when the first was posted (the side's clock); under this transfer's lock. */
    private long postedBytes;
    private long firstPostNanos;

    PrefillTransfer(PrefillSide side, String id, InetSocketAddress decode, long openedNanos, long deadlineNanos,
            Observer observer) {
        this.side = side;
        this.id = id;
        this.decode = decode;
        this.openedNanos = openedNanos;
        this.deadlineNanos = deadlineNanos;
        this.observer = observer;
    }

    /** The transfer id, as decode knows it. */
    public String id() {
        return id;
    }

    /** The notify address of the decode this transfer writes to. */
    public InetSocketAddress decode() {
        return decode;
    }

    /** The source blocks allocated for it on prefill, in the order the layers' copies use them. */
    public List<Long> localBlocks() {
        return localBlocks;
    }

    /** Decode's blocks its layers are written into; empty until decode's block list has come. */
    public List<Long> decodeBlocks() {
        return decodeBlocks;
    }

    /** The incarnation of the decode whose blocks it writes; 0 until decode's block list has come. */
    public long decodeIncarnation() {
        return decodeIncarnation;
    }

    /** Emits the abort's reason if the transfer is aborted; never completes otherwise. */
    public Mono<String> aborted() {
        return abortSignal.asMono();
    }

    /**
     * Writes the transfer's layers: waits for decode's block list (up to the transfer's deadline), posts layer
     * {@code l}'s copies once {@code events.get(l)} is ready, through the side's WRITE pipeline, and sends decode
     * the outcome; then drains and releases as the class comment says. Starts at once; call it once.
     *
     * @param events one GPU event per layer of the side's {@link KvLayout}, in layer order
     * @return a {@code Mono} of the outcome decode is told ({@code write_failed} included); it completes empty if
     *     the transfer is aborted instead (see {@link #aborted()}), including when it was called after the
     *     transfer's deadline. Subscribing (any number of times) does not start anything again.
     * @throws IllegalArgumentException if there is not one event per layer
     * @throws IllegalStateException if the transfer was already written
     */
    public Mono<WriteOutcome> write(List<? extends LayerEvent> events) {
        Objects.requireNonNull(events, "events");
        side.write(this, List.copyOf(events));
        return outcome.asMono();
    }

    /**
     * Aborts the transfer: no further layer is posted, its running write is cancelled, {@link #aborted()} emits
     * {@code reason}, and it ends.
     *
     * @return false, changing nothing, if it had already been aborted or ended
     */
    public boolean abort(String reason) {
        return side.abort(this, Objects.requireNonNull(reason, "reason"));
    }

    /**
     * Ends a transfer that will not be written (the caller gave up on it before {@link #write}): frees its
     * blocks and tells decode {@code release}. Does nothing if it has already ended.
     */
    public void close() {
        side.settle(this);
    }

    // ----- the side's bookkeeping -----

    Observer observer() {
        return observer;
    }

    long openedNanos() {
        return openedNanos;
    }

    long deadlineNanos() {
        return deadlineNanos;
    }

    long arrivalMillis() {
        return arrivalMillis;
    }

    /**
     * Takes the blocks granted to it; false if it has already ended (an abort came while it was being opened), when
     * whoever ended it may have freed its blocks before they were granted, so the caller frees them.
     */
    synchronized boolean localBlocks(List<Long> blocks) {
        if (ended) {
            return false;
        }
        this.localBlocks = List.copyOf(blocks);
        return true;
    }

    /**
     * Runs {@code use} (a forward pass writing this transfer's source blocks, say) only while the transfer still holds
     * its blocks: not aborted, not ended. It runs under the transfer's monitor, so an abort from another thread waits
     * for it to return before the blocks can be freed and granted to another transfer: that thread (a network event
     * loop, say) is held for as long as {@code use} takes.
     *
     * @return whether {@code use} ran; false, running nothing, once the transfer has been aborted or has ended
     */
    public synchronized boolean whileHeld(Runnable use) {
        Objects.requireNonNull(use, "use");
        if (abortReason != null || ended) {
            return false;
        }
        use.run();
        return true;
    }

    void decodeBlocks(List<Long> blocks) {
        this.decodeBlocks = List.copyOf(blocks);
    }

    /** This transfer took a session from the side's {@code DecodeSessions}; settling gives it back, once. */
    void sessionTaken() {
        sessionTaken = true;
    }

    boolean tookSession() {
        return sessionTaken;
    }

    void decodeIncarnation(long incarnation) {
        this.decodeIncarnation = incarnation;
    }

    boolean releaseDecode() {
        return releaseDecode;
    }

    void noReleaseToDecode() {
        this.releaseDecode = false;
    }

    /**
     * READ mode: read_ready is about to be sent, at {@code nowNanos} on the side's clock; from now on decode may read
     * the blocks, and release them. False,
     * changing nothing, once the transfer has been aborted or has ended: its blocks may be free, so nothing is offered.
     */
    synchronized boolean offer(long nowNanos) {
        if (abortReason != null || ended) {
            return false;
        }
        offered = true;
        offeredNanos = nowNanos;
        return true;
    }

    /** READ mode: when {@link #offer} said yes, on the side's clock; meaningless unless {@link #offered()}. */
    long offeredNanos() {
        return offeredNanos;
    }

    boolean offered() {
        return offered;
    }

    /** READ mode: decode said release for this transfer's blocks; false if it had already. */
    boolean consumerReleased() {
        return consumerReleased.tryEmitEmpty() == Sinks.EmitResult.OK;
    }

    Mono<Void> whenConsumerReleased() {
        return consumerReleased.asMono();
    }

    void outcome(WriteOutcome result) {
        outcome.tryEmitValue(result);
    }

    /** Marks the write as started; false if the transfer was aborted or ended first (then nothing is written). */
    synchronized boolean startWriting() {
        if (writing) {
            throw new IllegalStateException("transfer " + id + " is already being written; write it once");
        }
        if (abortReason != null || ended) {
            return false;
        }
        writing = true;
        return true;
    }

    /** Keeps the running write so that an abort can stop it; disposes it at once if already aborted. */
    void running(Disposable running) {
        boolean stop;
        synchronized (this) {
            stop = abortReason != null;
            if (!stop) {
                write = running;
            }
        }
        if (stop) {
            running.dispose();
        }
    }

    /** Whether a write was started. */
    synchronized boolean wrote() {
        return writing;
    }

    /** Aborts: see {@link #abort}; the side's half, without the side's counting and settling. */
    boolean markAborted(String reason) {
        Disposable running;
        synchronized (this) {
            if (abortReason != null || ended) {
                return false;
            }
            abortReason = reason;
            running = write;
        }
        if (running != null) {
            running.dispose();
        }
        abortSignal.tryEmitValue(reason);
        outcome.tryEmitEmpty();
        return true;
    }

    /** The reason it was aborted for, or null. */
    synchronized String abortReason() {
        return abortReason;
    }

    /**
     * Ends the transfer once.
     *
     * @return the statuses it posted, or null if it had already ended
     */
    List<TransferStatus> end() {
        List<TransferStatus> posted;
        synchronized (this) {
            if (ended) {
                return null;
            }
            ended = true;
            posted = List.copyOf(statuses);
        }
        outcome.tryEmitEmpty();
        return posted;
    }

    /** Bytes of every batch posted so far. */
    synchronized long postedBytes() {
        return postedBytes;
    }

    /** When the first batch was posted, on the clock given to {@link #recording}; meaningless before the first. */
    synchronized long firstPostNanos() {
        return firstPostNanos;
    }

    /** The statuses posted so far. */
    synchronized List<TransferStatus> posted() {
        return List.copyOf(statuses);
    }

    /**
     * {@code session} recording every status posted for this transfer (and its bytes, and when the first was posted
     * on {@code clock}), calling {@code beforeFirstPost} just before the first post and {@code afterPost} after each,
     * both under the transfer's monitor; refusing posts once aborted or ended, so that nothing is posted, nor said
     * to be, after {@link #end}.
     */
    TransferSession recording(TransferSession session, java.util.function.LongSupplier clock,
            Runnable beforeFirstPost, Runnable afterPost) {
        return new TransferSession() {
            @Override
            public long allocateTransferUid() {
                synchronized (PrefillTransfer.this) {
                    if (abortReason != null || ended) {
                        throw new TransferException(StatusCode.ERR_BAD_STATE, "transfer " + id
                                + " was aborted; not posting further layers");
                    }
                    return session.allocateTransferUid();
                }
            }

            @Override
            public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
                synchronized (PrefillTransfer.this) {
                    if (abortReason != null || ended) {
                        throw new TransferException(StatusCode.ERR_BAD_STATE, "transfer " + id
                                + " was aborted; not posting further layers");
                    }
                    if (statuses.isEmpty()) {
                        beforeFirstPost.run();
                        if (abortReason != null || ended) { // the hook aborted it, on this thread
                            throw new TransferException(StatusCode.ERR_BAD_STATE, "transfer " + id
                                    + " was aborted; not posting further layers");
                        }
                        firstPostNanos = clock.getAsLong();
                    }
                    TransferStatus status = session.batchWrite(plan, transferUid);
                    statuses.add(status);
                    postedBytes += plan.totalBytes();
                    afterPost.run();
                    return status;
                }
            }

            @Override
            public TransferStatus batchRead(BatchPlan plan, long transferUid) {
                throw new UnsupportedOperationException("the prefill side only writes");
            }

            @Override
            public MemoryRegion local() {
                return session.local();
            }

            @Override
            public MemoryRegion remote() {
                return session.remote();
            }
        };
    }

    @Override
    public String toString() {
        return "PrefillTransfer[" + id + " to " + decode + "]";
    }
}
