package dev.kvflux.tools.repro;

import java.util.Arrays;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The one thread behind {@link SweepWait}: a daemon thread, {@value #THREAD_NAME}, that every
 * {@link #PERIOD_NANOS} ns sweeps every registered request once, as vLLM's MoRIIO connector sweeps its requests'
 * statuses from one thread. One per process, started by the first registration.
 *
 * <p>It sleeps with {@link LockSupport#parkNanos} after each sweep, not on a {@code ScheduledExecutorService}:
 * vLLM sleeps 1 ms after each pass over its statuses, a fixed delay, so a sweep that takes long (thousands of
 * requests) stretches the period instead of queueing sweeps behind it; the thread is ours, named, and a sweep
 * allocates no task. While nothing is registered it parks without a timeout and costs no wake-ups; a
 * registration unparks it.
 *
 * <p>Registration is safe from any thread: requests go through a {@link ConcurrentLinkedQueue} and are moved
 * into the sweep's own array, which only this thread touches, at the start of the next sweep. A request is
 * swept until it says it is done (settled, or cancelled); a request whose sweep throws is dropped and the
 * thread goes on.
 */
final class StatusSweeper implements Runnable {
    /** The sweeping thread's name: {@code kvflux-} so that {@code kvflux repro} counts its CPU with the wait's. */
    static final String THREAD_NAME = "kvflux-poll-1ms";
    /** 1 ms, vLLM's sleep between two passes over its statuses. */
    static final long PERIOD_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private static final StatusSweeper SHARED = new StatusSweeper();

    /** One request's statuses, swept by the thread. */
    interface Swept {
        /**
         * Queries the request's statuses once, {@code now} being {@link System#nanoTime()} at the sweep's start;
         * true once the request is done (it has signalled its subscriber itself, or was cancelled) and is to be
         * dropped.
         */
        boolean sweep(long now);
    }

    private final Queue<Swept> incoming = new ConcurrentLinkedQueue<>();
    private final AtomicInteger registered = new AtomicInteger();
    private volatile Thread thread;
    /** Set by the thread just before it parks with nothing to sweep; a registration then unparks it. */
    private volatile boolean idle;
    /** Sweeps so far; written by the thread only. */
    private volatile long sweeps;
    /** The requests being swept; touched by the thread only. */
    private Swept[] swept = new Swept[64];
    private int count;

    private StatusSweeper() {
    }

    /** The process's sweeper. */
    static StatusSweeper shared() {
        return SHARED;
    }

    /** Sweeps {@code request} from the next sweep on, until it is done; any thread may call it. */
    void register(Swept request) {
        registered.incrementAndGet();
        incoming.add(request);
        Thread sweeping = started();
        if (idle) {
            LockSupport.unpark(sweeping);
        }
    }

    /** Requests registered and not yet dropped. */
    int registered() {
        return registered.get();
    }

    /** Sweeps done since the thread started. */
    long sweeps() {
        return sweeps;
    }

    /** The sweeping thread, started on first use. */
    Thread started() {
        Thread current = thread;
        if (current == null) {
            synchronized (this) {
                current = thread;
                if (current == null) {
                    current = Thread.ofPlatform().name(THREAD_NAME).daemon().unstarted(this);
                    thread = current;
                    current.start();
                }
            }
        }
        return current;
    }

    @Override
    public void run() {
        while (true) {
            for (Swept request; (request = incoming.poll()) != null; ) {
                if (count == swept.length) {
                    swept = Arrays.copyOf(swept, count * 2);
                }
                swept[count++] = request;
            }
            if (count == 0) {
                idle = true;
                if (incoming.isEmpty()) {
                    LockSupport.park(this);
                }
                idle = false;
                continue;
            }
            sweep(System.nanoTime());
            LockSupport.parkNanos(this, PERIOD_NANOS);
        }
    }

    /** One sweep: every request once, compacting away those that are done. */
    private void sweep(long now) {
        int kept = 0;
        for (int i = 0; i < count; i++) {
            Swept request = swept[i];
            boolean done;
            try {
                done = request.sweep(now);
            } catch (RuntimeException thrown) {
                done = true; // a subscriber threw from its signal: the request is over, the thread goes on
            }
            if (!done) {
                swept[kept++] = request;
            }
        }
        Arrays.fill(swept, kept, count, null);
        registered.addAndGet(kept - count);
        count = kept;
        sweeps = sweeps + 1;
    }
}
