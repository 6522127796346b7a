package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.EventState;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * What the completion events of one stream have shown, shared by the statuses of the batches posted on
 * it, so that most of their queries need no native call. On a stream, work runs in the order it was
 * queued, so events complete in the order they were recorded: once the event of sequence {@code s} is
 * ready, every earlier one is; while it is not, no later one is.
 *
 * <ul>
 *   <li>A status whose sequence is at or below the highest one seen ready is done: no query.</li>
 *   <li>A status whose sequence is at or above one seen not ready less than {@link #FRESH_NANOS} ago is
 *       still in flight: no query. The answer can be that much late, never wrong.</li>
 *   <li>Otherwise the status queries its event and records what it saw.</li>
 * </ul>
 * Thread-safe without locks; what it records are true observations, so racing updates only lose detail.
 *
 * <p>Unshared ({@code shared == false}, {@link GpuCopyEngine.Config#sharedStreamProgress()} off), the
 * history answers nothing: every query of an in-flight status is a native query, still counted, so a
 * run can measure what the sharing saves.
 */
final class StreamProgress {
    /** How long a "not ready" seen on the stream answers for later events: 0.1 ms, 1% of a 10 ms slice. */
    static final long FRESH_NANOS = 100_000;

    private static final VarHandle COMPLETED;

    static {
        try {
            COMPLETED = MethodHandles.lookup().findVarHandle(StreamProgress.class, "completed", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** An event seen not ready at a time. */
    private record Pending(long sequence, long atNanos) {
    }

    private final LongSupplier clock;
    private final LongAdder queries;
    private final boolean shared;
    private long recorded;
    private volatile long completed;
    private volatile Pending pending;

    /**
     * Progress on a stream, counting native queries in {@code queries}; {@code clock} gives nanoseconds;
     * unless {@code shared}, {@link #known} never answers, so each status queries its own event.
     */
    StreamProgress(LongAdder queries, LongSupplier clock, boolean shared) {
        this.queries = queries;
        this.clock = clock;
        this.shared = shared;
    }

    /** Shared progress on a stream, counting native queries in {@code queries}; {@code clock} gives nanoseconds. */
    StreamProgress(LongAdder queries, LongSupplier clock) {
        this(queries, clock, true);
    }

    /** The sequence of the event recorded now; the caller holds the stream's lock, so sequences follow stream order. */
    long nextSequence() {
        return ++recorded;
    }

    /** READY or NOT_READY when the stream's history answers for {@code sequence}, else (always, unshared) null. */
    EventState known(long sequence) {
        if (!shared) {
            return null;
        }
        if (sequence <= completed) {
            return EventState.READY;
        }
        Pending seen = pending;
        if (seen != null && sequence >= seen.sequence() && clock.getAsLong() - seen.atNanos() < FRESH_NANOS) {
            return EventState.NOT_READY;
        }
        return null;
    }

    /** The stream is known to have passed event {@code sequence} (it was seen ready, or a later host function ran). */
    void passed(long sequence) {
        long seen = completed;
        while (seen < sequence && !COMPLETED.weakCompareAndSet(this, seen, sequence)) {
            seen = completed;
        }
    }

    /** Queries {@code event}, of {@code sequence}, and records the answer; a failure propagates unrecorded. */
    EventState query(dev.kvflux.bindings.LayerEvent event, long sequence) {
        queries.increment();
        EventState state = event.query();
        if (state == EventState.READY) {
            passed(sequence);
        } else {
            long now = clock.getAsLong();
            Pending seen = pending;
            if (seen == null || sequence < seen.sequence() || now - seen.atNanos() >= FRESH_NANOS / 4) {
                pending = new Pending(sequence, now);
            }
        }
        return state;
    }
}
