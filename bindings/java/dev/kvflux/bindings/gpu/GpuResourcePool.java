package dev.kvflux.bindings.gpu;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Supplier;

/**
 * Native resources an engine lends to one batch at a time (completion events, scatter/gather metadata
 * slots): idle ones wait in a lock-free queue, and every one the pool made or adopted is remembered, idle or
 * lent, so that {@link #closeAll} frees them all, those of batches still in flight included.
 *
 * <p>Thread-safe. {@link #acquire} and {@link #release} take no lock: the only allocation on that path is
 * the queue's node on release, and a new resource when none is idle. Making or adopting a resource,
 * {@link #discard} and {@link #closeAll} lock the record of all of them.
 */
final class GpuResourcePool<T extends AutoCloseable> {
    private final Supplier<? extends T> factory;
    private final Queue<T> idle = new ConcurrentLinkedQueue<>();
    /** Every resource made or adopted and not discarded, in that order: the order {@link #closeAll} closes. */
    private final List<T> all = new ArrayList<>();

    /** A pool whose resources {@code factory} makes, each when one is needed and none is idle. */
    GpuResourcePool(Supplier<? extends T> factory) {
        this.factory = Objects.requireNonNull(factory, "factory");
    }

    /** Makes {@code count} resources and leaves them idle (a failure leaves those made so far remembered). */
    void fill(int count) {
        for (int i = 0; i < count; i++) {
            idle.add(create());
        }
    }

    /** An idle resource, or a new one when none is idle. */
    T acquire() {
        T resource = idle.poll();
        return resource != null ? resource : create();
    }

    /**
     * Remembers {@code resource}, made elsewhere (a one-off of another size), so that {@link #closeAll} frees
     * it while it is lent; give it back with {@link #discard}, not {@link #release}, to keep it out of the pool.
     */
    T adopt(T resource) {
        Objects.requireNonNull(resource, "resource");
        synchronized (all) {
            all.add(resource);
        }
        return resource;
    }

    /** Gives {@code resource} back for the next {@link #acquire}. */
    void release(T resource) {
        idle.add(resource);
    }

    /**
     * Forgets {@code resource} and closes it at once. A failure to close it is dropped: a resource is
     * discarded after its batch failed (the failure was already reported) or as a one-off whose batch is done.
     */
    void discard(T resource) {
        synchronized (all) {
            all.remove(resource);
        }
        try {
            resource.close();
        } catch (Exception ignored) {
            // See above: this failure says nothing more.
        }
    }

    /** How many resources are idle now (lent ones are not). */
    int idleCount() {
        return idle.size();
    }

    /**
     * Closes every resource made or adopted and not discarded, idle or lent, in the order they were made; a
     * failure does not stop the others, and the first is thrown once all were tried.
     */
    void closeAll() {
        List<T> snapshot;
        synchronized (all) {
            snapshot = new ArrayList<>(all);
        }
        closeEach(snapshot);
    }

    /**
     * Closes each of {@code resources} in order, a failure not stopping the others; then throws the first
     * failure (a checked one wrapped in an {@link IllegalStateException}), if any.
     */
    static void closeEach(Iterable<? extends AutoCloseable> resources) {
        RuntimeException first = null;
        for (AutoCloseable resource : resources) {
            try {
                resource.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e instanceof RuntimeException r ? r : new IllegalStateException(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    private T create() {
        T resource = factory.get();
        synchronized (all) {
            all.add(resource);
        }
        return resource;
    }
}
