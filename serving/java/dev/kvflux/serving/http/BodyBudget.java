package dev.kvflux.serving.http;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The request-body bytes a process holds in memory at once, over all its HTTP servers: a body is reserved before
 * its bytes are read (its declared length at once, or chunk by chunk when it declares none) and given back when its
 * request ends. A body that finds the budget spent is answered 503 with {@code Retry-After} without being read, so
 * many large bodies at once are refused instead of filling the heap.
 *
 * <p>A body costs more heap than its bytes while it is parsed and forwarded (its text, its JSON tree, the bodies
 * sent on), so {@link #ofHeap} sizes the budget as a share of the heap divided by that cost. Thread-safe.
 */
public final class BodyBudget {
    /**
     * How many times its own size a body costs in heap while a server holds it: the bytes, its text, the parsed tree
     * and, on the proxy, the two bodies it sends on.
     */
    public static final int HEAP_COST = 6;
    /** The share of the heap bodies may take, by default: a quarter. */
    private static final int HEAP_SHARE_DIVISOR = 4;
    /** The smallest budget: room for one body of the serving APIs' limit. */
    private static final long MIN_BYTES = HttpJson.MAX_BODY_BYTES;

    private static final BodyBudget PROCESS = ofHeap(Runtime.getRuntime().maxMemory());

    private final long capacity;
    private final AtomicLong reserved = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();

    private BodyBudget(long capacity) {
        this.capacity = capacity;
    }

    /**
     * A budget of {@code bytes} body bytes.
     *
     * @throws IllegalArgumentException if {@code bytes} is less than one body of {@link HttpJson#MAX_BODY_BYTES}
     */
    public static BodyBudget of(long bytes) {
        if (bytes < MIN_BYTES) {
            throw new IllegalArgumentException("the request-body budget must hold at least one body of "
                    + (MIN_BYTES >> 20) + " MiB, got " + bytes + " bytes");
        }
        return new BodyBudget(bytes);
    }

    /**
     * The budget for a heap of {@code maxHeapBytes}: a quarter of it over {@link #HEAP_COST}, and at least one body
     * of {@link HttpJson#MAX_BODY_BYTES} (16 MiB for a 384 MiB heap or less; 21 MiB for a 512 MiB heap).
     */
    public static BodyBudget ofHeap(long maxHeapBytes) {
        return new BodyBudget(Math.max(MIN_BYTES, maxHeapBytes / HEAP_SHARE_DIVISOR / HEAP_COST));
    }

    /** The process's budget, sized from its heap ({@link #ofHeap}); every server uses it unless given another. */
    public static BodyBudget process() {
        return PROCESS;
    }

    /**
     * Takes {@code bytes} from the budget if they fit beside what is held.
     *
     * @return whether they were taken; when not, nothing was
     */
    public boolean tryReserve(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("a reservation is 0 bytes or more, got " + bytes);
        }
        while (true) {
            long held = reserved.get();
            if (held + bytes > capacity) {
                refusals.incrementAndGet();
                return false;
            }
            if (reserved.compareAndSet(held, held + bytes)) {
                return true;
            }
        }
    }

    /** Gives back {@code bytes} taken by {@link #tryReserve}. */
    public void release(long bytes) {
        reserved.addAndGet(-bytes);
    }

    /** The most body bytes held at once. */
    public long capacity() {
        return capacity;
    }

    /** The body bytes held now. */
    public long reserved() {
        return reserved.get();
    }

    /** Bodies refused so far because the budget was spent. */
    public long refusals() {
        return refusals.get();
    }

    @Override
    public String toString() {
        return "BodyBudget[" + (capacity >> 20) + " MiB, " + (reserved.get() >> 20) + " MiB held]";
    }
}
