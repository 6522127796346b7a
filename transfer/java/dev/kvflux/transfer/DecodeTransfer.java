package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyMessage;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * One transfer on the decode side, from {@link DecodeSide#open} until {@link #close()}: the blocks decode granted
 * it, the prefill its KV comes from, and the wait for that KV.
 *
 * <h2>How the wait for the KV ends ({@link #kv()}, exactly once)</h2>
 * <ul>
 *   <li>It completes: prefill said {@code write_done} (and its content check, if any, matched the granted
 *       blocks); decode may read the KV.</li>
 *   <li>It errors with a {@link ReceiveFailedException} whose {@link ReceiveFailedException#kind() kind} says
 *       why: prefill said {@code write_failed} ({@code WRITE_FAILED}, with prefill's status code and reason); the
 *       content check did not match ({@code CORRUPT}); no notice came within the receive deadline
 *       ({@code DEADLINE}); the block list could not be delivered within half of it ({@code UNDELIVERABLE}); the
 *       prefill restarted ({@code PREFILL_RESTARTED}); decode is shutting down ({@code SHUTTING_DOWN}).</li>
 *   <li>It errors with a {@link TransferRefusedException} ({@code DUPLICATE}) if the id was already waited for.</li>
 *   <li>Its subscriber cancels it (decode's client went away).</li>
 * </ul>
 * Without a receive deadline (vLLM's behaviour before its fix, kept to measure against) a transfer whose notice
 * never comes waits until it is cancelled.
 *
 * <h2>When the transfer ends ({@link #close()}, exactly once)</h2>
 * Its blocks stay QUARANTINED until prefill says {@code release} (at once if it already did), or until the block
 * lease, counted from the later of now and the receive deadline; prefill is sent {@code abort}, with the reason,
 * unless it already said how its write ended. Call it when the request has ended, whatever way it ended.
 */
public final class DecodeTransfer implements AutoCloseable {

    /** Hooks into one transfer's life; every method has a no-op default and must be quick and not block. */
    public interface Observer {
        /** Observes nothing. */
        Observer NONE = new Observer() { };

        /** The request's trace id for the side's log lines about it (MDC {@code trace_id}); null for none. */
        default String traceId() {
            return null;
        }

        /** A notice about this transfer arrived ({@code write_done}, {@code write_failed}, {@code release}). */
        default void notice(NotifyMessage message) {
        }
    }

    private final DecodeSide side;
    private final String id;
    private final InetSocketAddress prefill;
    private final List<Long> blocks;
    private final Observer observer;
    private final long openedMillis = System.currentTimeMillis();
    private final long openedNanos;
    private final Sinks.Empty<Void> stop = Sinks.empty();
    private final AtomicBoolean waited = new AtomicBoolean();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AtomicBoolean waitRecorded = new AtomicBoolean();
    /** Set once prefill said write_done or write_failed: then prefill needs no abort. */
    private volatile boolean prefillSettled;
    /** Why the wait failed, for the abort sent to prefill; null while it has not. */
    private volatile String failure;
    /** READ mode: where prefill keeps the KV; null until its read_ready came. */
    private volatile NotifyMessage.ReadReady readReady;
    /** READ mode: set once nothing the reads posted is in flight; then its blocks may be freed at the end. */
    private volatile boolean readsDrained;
    private volatile boolean readsStarted;
    /** Set once the transfer has ended: no read may start after it; guarded by this. */
    private boolean readsClosed;
    private final Sinks.Many<Integer> layers = Sinks.many().replay().all();

    DecodeTransfer(DecodeSide side, String id, InetSocketAddress prefill, List<Long> blocks, Observer observer,
            long openedNanos) {
        this.side = side;
        this.openedNanos = openedNanos;
        this.id = id;
        this.prefill = prefill;
        this.blocks = List.copyOf(blocks);
        this.observer = observer;
    }

    /** The transfer id, as prefill knows it. */
    public String id() {
        return id;
    }

    /** The notify address of the prefill the KV comes from. */
    public InetSocketAddress prefill() {
        return prefill;
    }

    /** The blocks decode granted it, in the order prefill writes the layers' blocks into them. */
    public List<Long> blocks() {
        return blocks;
    }

    /**
     * The wait for the KV: registers the transfer, sends prefill the block list ({@code remote_blocks}, retried
     * for half the receive deadline), and ends as the class comment says. Nothing happens until it is subscribed;
     * subscribe once. Signals arrive on a notify event loop, or on a timer's thread for the deadline.
     *
     * @throws IllegalStateException (as the {@code Mono}'s error) if subscribed a second time
     */
    public Mono<Void> kv() {
        return Mono.defer(() -> waited.compareAndSet(false, true) ? side.kv(this)
                : Mono.error(new IllegalStateException("transfer " + id + "'s KV is already being waited for;"
                        + " subscribe to kv() once")));
    }

    /**
     * READ mode: the layers, 0, 1, …, each as soon as its reads have passed its drain barrier, so that a step
     * subscribed here never runs before its layer's KV is in place; it completes with the last layer, or errors as
     * {@link #kv()} does. {@link #kv()} must be subscribed for anything to happen. In WRITE mode it completes empty
     * once the KV has arrived.
     */
    public Flux<Integer> layers() {
        return layers.asFlux();
    }

    /** Ends the transfer (see the class comment); later calls do nothing. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            side.ended(this);
        }
    }

    // ----- the side's bookkeeping -----

    Observer observer() {
        return observer;
    }

    long openedMillis() {
        return openedMillis;
    }

    long openedNanos() {
        return openedNanos;
    }

    /** Fails the wait from outside (prefill restarted, decode shutting down); false if it had already ended. */
    boolean fail(ReceiveFailedException reason) {
        return stop.tryEmitError(reason) == Sinks.EmitResult.OK;
    }

    Mono<Void> stopped() {
        return stop.asMono();
    }

    boolean prefillSettled() {
        return prefillSettled;
    }

    void prefillSettled(boolean settled) {
        this.prefillSettled = settled;
    }

    void readReady(NotifyMessage.ReadReady ready) {
        this.readReady = ready;
    }

    NotifyMessage.ReadReady readReady() {
        return readReady;
    }

    void layerRead(int layer) {
        layers.tryEmitNext(layer);
    }

    void layersEnded(Throwable error) {
        if (error == null) {
            layers.tryEmitComplete();
        } else {
            layers.tryEmitError(error);
        }
    }

    /**
     * READ mode: decode begins reading this transfer's KV (it may post reads from now on); false, changing nothing, once
     * the transfer has ended ({@link #endReads}), whose blocks may then be free already.
     */
    synchronized boolean startReads() {
        if (readsClosed) {
            return false;
        }
        this.readsStarted = true;
        return true;
    }

    /**
     * READ mode: the transfer has ended, so no read starts from now on; whether reads had started (they then release
     * the blocks once drained). Decided under the same monitor as {@link #startReads}, so a read cannot start into
     * blocks that ending frees.
     */
    synchronized boolean endReads() {
        readsClosed = true;
        return readsStarted;
    }

    boolean readsStarted() {
        return readsStarted;
    }

    /** The wait for the KV has ended; true only the first time, so that it is recorded once. */
    boolean waitEnded() {
        return waitRecorded.compareAndSet(false, true);
    }

    /** Whether the wait for the KV has ended, by any outcome ({@link #waitEnded} was called). */
    boolean waitOver() {
        return waitRecorded.get();
    }

    boolean readsDrained() {
        return readsDrained;
    }

    void drained() {
        this.readsDrained = true;
    }

    String failure() {
        return failure;
    }

    void failure(String reason) {
        this.failure = Objects.requireNonNull(reason, "reason");
    }

    @Override
    public String toString() {
        return "DecodeTransfer[" + id + " from " + prefill + "]";
    }
}
