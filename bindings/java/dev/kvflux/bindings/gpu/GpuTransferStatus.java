package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.PushTimeline;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.internal.PushListeners;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The status of one batch posted by {@link GpuCopyEngine}: IN_PROGRESS once posted; a query of the
 * batch's completion event moves it to SUCCESS (or ERR_GPU_OP with the runtime's error), exactly as MoRI's
 * xGMI status does, and nothing else completes it unless the batch was posted with push completion, in
 * which case a host function behind the batch completes it and emits on {@link #pushed()} and to the
 * {@linkplain #onPushed(Consumer) listener}.
 *
 * <p>Statuses posted on the same stream share what their queries saw ({@link StreamProgress}): a later
 * event seen ready settles an earlier status without a query, and an earlier event just seen not ready
 * answers for a later one; a status not answered so queries a later event on the stream before its own.
 * Locks: a status may take a later status's lock on the same stream while holding its own, never an
 * earlier one's, so no two wait on each other.
 *
 * <p>Thread-safe: queries, the push and the blocking wait may race; the event goes back to its pool once.
 */
final class GpuTransferStatus implements PushedStatus {
    private final long transferUid;
    private final Sinks.One<StatusCode> pushed = Sinks.one();
    /** Every listener given to {@link #onPushed(Consumer)}, chained ({@link PushListeners}); null until one is. */
    private volatile Consumer<StatusCode> listener;
    private static final VarHandle LISTENER = PushListeners.field(MethodHandles.lookup(), GpuTransferStatus.class,
            "listener");
    private LayerEvent event;
    private Consumer<LayerEvent> release;
    private Runnable blockingWait;
    private long hostFunction;
    private StreamProgress progress;
    private long sequence;
    private volatile StatusCode code = StatusCode.INIT;
    private volatile String message = "";
    /** When the host function behind the batch ran ({@link System#nanoTime()}), if it ran before the status settled. */
    private volatile long copiesEndedAt = UNKNOWN_TIME;
    /** Whether a host function was queued behind the batch ({@link #pushedBy}): only then does a push come. */
    private volatile boolean pushes;
    /** The dispatch thread while it runs this status's host-function callback; null otherwise. */
    private volatile Thread pushing;
    /** When the dispatch thread took the callback, and when the status settled (the push's stages, {@link #timeline}). */
    private long dispatchedAt = UNKNOWN_TIME;
    private long settledAt = UNKNOWN_TIME;
    /** Written last when the status settles (volatile): whether its push settled it; the stages above are whole then. */
    private volatile boolean byPush;

    private final long bytes;

    GpuTransferStatus(long transferUid) {
        this(transferUid, -1);
    }

    GpuTransferStatus(long transferUid, long bytes) {
        this.transferUid = transferUid;
        this.bytes = bytes;
    }

    @Override
    public long bytes() {
        return bytes;
    }

    long transferUid() {
        return transferUid;
    }

    /** Arms the status once the batch is posted: {@code event} completes it, then goes to {@code release}. */
    synchronized void posted(LayerEvent event, Consumer<LayerEvent> release, Runnable blockingWait) {
        posted(event, release, blockingWait, null, 0);
    }

    /**
     * Arms the status, its event being number {@code sequence} recorded on a stream whose {@code progress}
     * its queries share: most of them are then answered without a native call (see {@link StreamProgress}).
     */
    synchronized void posted(LayerEvent event, Consumer<LayerEvent> release, Runnable blockingWait,
                             StreamProgress progress, long sequence) {
        this.progress = progress;
        this.sequence = sequence;
        this.event = event;
        this.release = release;
        this.blockingWait = blockingWait;
        code = StatusCode.IN_PROGRESS;
        if (progress != null) {
            progress.recorded(this, sequence);
        }
    }

    /**
     * What posting does last. Without shared stream progress, poll once, as MoRI's submit calls do. With
     * it, nothing: a failed copy or record call has already failed the status, and the first query of a
     * wait learns the rest, perhaps from a later event on the stream.
     */
    void afterPosting() {
        boolean poll;
        synchronized (this) {
            poll = progress == null || !progress.shared();
        }
        if (poll) {
            code();
        }
    }

    /**
     * A query of this status's event made for an earlier status on the stream: READY or NOT_READY as the
     * event says (recorded in the stream's progress), READY once this status has succeeded, or null when it
     * is no longer event {@code expected} (the slot was reused), it failed, or the query failed. Does not
     * settle this status: its own next query does, from the stream's progress, without a native call.
     */
    synchronized EventState queriedAhead(long expected) {
        if (sequence != expected || progress == null) {
            return null;
        }
        if (code == StatusCode.SUCCESS) {
            return EventState.READY;
        }
        if (code != StatusCode.IN_PROGRESS || event == null) {
            return null;
        }
        try {
            return progress.query(event, sequence);
        } catch (RuntimeException failed) {
            return null;
        }
    }

    /**
     * Ties the host function with {@code key} (see {@link HostFunctions}) to this status: once the status
     * is settled, by that host function or otherwise, the callback is no longer kept.
     */
    synchronized void pushedBy(long key) {
        pushes = true;
        if (code.isTerminal()) {
            HostFunctions.cancel(key);
        } else {
            hostFunction = key;
        }
    }

    /** Fails the status (posting failed, or its work did). Failure is sticky, as in MoRI. */
    void fail(StatusCode failure, String why) {
        boolean failed;
        synchronized (this) {
            failed = !code.isTerminal();
            if (failed) {
                finish(failure, why);
            }
        }
        if (failed) {
            announce(failure);
        }
    }

    @Override
    public StatusCode code() {
        StatusCode now = code;
        if (now != StatusCode.IN_PROGRESS) {
            return now;
        }
        synchronized (this) {
            if (code != StatusCode.IN_PROGRESS) {
                return code;
            }
            try {
                if (query() != EventState.READY) {
                    return StatusCode.IN_PROGRESS;
                }
                finish(StatusCode.SUCCESS, "");
            } catch (RuntimeException failed) {
                finish(StatusCode.ERR_GPU_OP, failed.getMessage());
            }
            now = code;
        }
        // Emitted outside the lock: subscribers may query other statuses.
        announce(now);
        return now;
    }

    /**
     * Tells the listener and {@link #pushed()}'s subscribers that the status is terminal. The code is written
     * before the listener is read here, and {@link #onPushed(Consumer)} writes the listener before it reads the
     * code (both volatile), so a listener set while this runs is given the code once or twice, never missed.
     */
    private void announce(StatusCode terminal) {
        Consumer<StatusCode> l = listener;
        if (l != null) {
            l.accept(terminal);
        }
        pushed.tryEmitValue(terminal);
    }

    /** The stream has run past this batch's event: tell the stream's progress, so no cached "not ready" hides it. */
    private void streamPassed() {
        StreamProgress onStream;
        long mine;
        synchronized (this) {
            onStream = progress;
            mine = sequence;
        }
        if (onStream != null) {
            onStream.passed(mine);
        }
    }

    /**
     * The event's state: from the stream's history when it answers, else from a later event on the stream
     * seen ready, else from a native query of this event; at most two native queries.
     */
    private EventState query() {
        if (progress == null) {
            return event.query();
        }
        EventState known = progress.known(sequence);
        if (known != null) {
            return known;
        }
        return progress.readyAhead(sequence) ? EventState.READY : progress.query(event, sequence);
    }

    @Override
    public String message() {
        return message;
    }

    /**
     * For a batch posted with push completion whose host function settled it: the {@link System#nanoTime()}
     * at which the host function ran, which is when the stream had passed the batch's copies. Unknown for a
     * status settled by a query first (its event says it is done, not since when: telling would need
     * timing events and a native elapsed-time call per batch).
     */
    @Override
    public long completedAtNanos() {
        return code == StatusCode.SUCCESS ? copiesEndedAt : UNKNOWN_TIME;
    }

    /** {@inheritDoc} Once settled by its host function's push or by a query. */
    @Override
    public StatusCode settledCode() {
        StatusCode now = code;
        return now.isTerminal() ? now : null;
    }

    @Override
    public Mono<StatusCode> pushed() {
        return pushed.asMono();
    }

    /**
     * {@inheritDoc} On the CUDA (or HIP) engine: the host function's run on the runtime's thread, the dispatch
     * thread ({@code kvflux-gpu-host-functions}) taking it, and the settling; the engine has no queue of its own in
     * between.
     */
    @Override
    public synchronized PushTimeline timeline() {
        if (!byPush) {
            return PushTimeline.NONE;
        }
        return new PushTimeline(copiesEndedAt, dispatchedAt, UNKNOWN_TIME, UNKNOWN_TIME, UNKNOWN_TIME, settledAt);
    }

    /**
     * {@inheritDoc} Given on the host-function thread ({@code kvflux-gpu-host-functions}) for a batch posted with
     * push, on the thread of the query that settled the status otherwise, or at once on the caller's if the status
     * is already terminal. Each listener given is told. False, taking no listener, for a batch posted without push
     * that is still in flight: nothing but a query settles it.
     */
    @Override
    public boolean onPushed(Consumer<StatusCode> listener) {
        if (!pushes && !code.isTerminal()) {
            return false; // posted without a host function: only a query settles it, so a wait must query
        }
        PushListeners.add(LISTENER, this, listener);
        StatusCode now = code;
        if (now.isTerminal()) {
            listener.accept(now);
        }
        return true;
    }

    /**
     * The host function behind the batch ran: the stream has passed the batch's event, so one query
     * settles the status. Runs on the host-function thread, never inside the runtime's callback;
     * {@code ranAt} is the {@link System#nanoTime()} at which the host function ran.
     */
    void hostFunctionRan(long ranAt) {
        long dispatched = System.nanoTime();
        if (code == StatusCode.IN_PROGRESS) {
            copiesEndedAt = ranAt;
        }
        synchronized (this) {
            dispatchedAt = dispatched;
        }
        pushing = Thread.currentThread();
        try {
            streamPassed();
            StatusCode now = code();
            for (int i = 0; i < 1000 && now == StatusCode.IN_PROGRESS; i++) {
                Thread.onSpinWait();
                now = code();
            }
            if (now == StatusCode.IN_PROGRESS) {
                awaitTerminal();
            }
        } finally {
            pushing = null;
        }
    }

    /** Blocks until the batch's event is done (MoRI's wait callback), then settles the status. */
    void awaitTerminal() {
        Runnable wait;
        synchronized (this) {
            wait = code == StatusCode.IN_PROGRESS ? blockingWait : null;
        }
        if (wait != null) {
            try {
                wait.run();
                streamPassed();
            } catch (RuntimeException failed) {
                fail(StatusCode.ERR_GPU_OP, failed.getMessage());
            }
            code();
        }
    }

    private void finish(StatusCode terminal, String why) {
        settledAt = System.nanoTime();
        byPush = terminal == StatusCode.SUCCESS && pushing == Thread.currentThread();
        message = why == null ? "" : why;
        code = terminal;
        if (hostFunction != 0) {
            HostFunctions.cancel(hostFunction);
            hostFunction = 0;
        }
        if (event != null) {
            LayerEvent done = event;
            event = null;
            release.accept(done);
        }
    }

    @Override
    public String toString() {
        return "GpuTransferStatus[uid " + transferUid + ", " + code + "]";
    }
}
