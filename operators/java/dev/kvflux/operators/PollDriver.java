package dev.kvflux.operators;

import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Queue;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The shared poll loop behind {@link CompletionWait#sharedPoll()}: instead of one timer task per
 * waiting request per slice, one shard per core ticks every slice on the scheduler and polls every
 * request registered with it. A request is polled at each tick of its shard from its registration until
 * it settles or is cancelled; ticks are a slice apart, so a status is seen within one slice of its
 * completion, as with the per-request interval. A shard's ticking stops while it has nothing to poll.
 *
 * <p>One driver per scheduler and slice, created on first use and dropped with its scheduler (so a
 * {@code VirtualTimeScheduler} gets its own, driven by virtual time). A tick allocates nothing; a
 * registration allocates one queue node.
 */
final class PollDriver {
    /**
     * Drivers by scheduler and slice. Weak both ways: a driver holds its scheduler, so a strong value
     * would keep its key alive for ever. An idle driver may be collected and made again; a ticking shard
     * is kept alive by its scheduler until it has nothing left to poll.
     */
    private static final Map<Scheduler, Map<Long, WeakReference<PollDriver>>> DRIVERS = new WeakHashMap<>();

    /** What a shard polls: a request's statuses, settled or not. */
    interface Polled {
        /** Polls once; true once the request is settled (it then signals its subscriber itself). */
        boolean pollFromDriver();

        /** Whether the request was cancelled or ended otherwise; the shard then drops it. */
        boolean gone();
    }

    private final Shard[] shards;
    private final AtomicInteger next = new AtomicInteger();

    private PollDriver(Scheduler scheduler, long sliceNanos, int shardCount) {
        shards = new Shard[shardCount];
        for (int i = 0; i < shardCount; i++) {
            shards[i] = new Shard(this, scheduler, sliceNanos);
        }
    }

    /** The driver for {@code scheduler} and {@code sliceNanos}: one shard per core ({@link Schedulers#DEFAULT_POOL_SIZE}). */
    static PollDriver of(Scheduler scheduler, long sliceNanos) {
        Objects.requireNonNull(scheduler, "scheduler");
        synchronized (DRIVERS) {
            Map<Long, WeakReference<PollDriver>> bySlice = DRIVERS.computeIfAbsent(scheduler, s -> new HashMap<>());
            WeakReference<PollDriver> known = bySlice.get(sliceNanos);
            PollDriver driver = known != null ? known.get() : null;
            if (driver == null) {
                driver = new PollDriver(scheduler, sliceNanos, Schedulers.DEFAULT_POOL_SIZE);
                bySlice.put(sliceNanos, new WeakReference<>(driver));
            }
            return driver;
        }
    }

    /** Polls {@code polled} at every tick of one shard until it settles or is gone. */
    void register(Polled polled) {
        shards[Math.floorMod(next.getAndIncrement(), shards.length)].add(polled);
    }

    /** Requests registered and not yet dropped, over every shard (for tests and figures). */
    int registered() {
        int sum = 0;
        for (Shard shard : shards) {
            sum += shard.size();
        }
        return sum;
    }

    /** One shard: a list of requests it alone polls, one periodic task while it has any. */
    private static final class Shard {
        /** Kept so that a ticking shard (held by its scheduler's task) keeps its driver, and the map's entry. */
        @SuppressWarnings("unused")
        private final PollDriver owner;
        private final Scheduler scheduler;
        private final long sliceNanos;
        private final Queue<Polled> incoming = new ConcurrentLinkedQueue<>();
        private final AtomicBoolean running = new AtomicBoolean();
        private final AtomicInteger size = new AtomicInteger();
        /** Touched only by the tick (one at a time: a periodic task never overlaps itself). */
        private Polled[] polled = new Polled[64];
        private int count;
        private volatile Disposable ticking;

        Shard(PollDriver owner, Scheduler scheduler, long sliceNanos) {
            this.owner = owner;
            this.scheduler = scheduler;
            this.sliceNanos = sliceNanos;
        }

        int size() {
            return size.get();
        }

        void add(Polled request) {
            size.incrementAndGet();
            incoming.add(request);
            startIfIdle();
        }

        /** Starts ticking unless it already does; a scheduler that refuses (disposed) leaves it idle and throws. */
        private void startIfIdle() {
            if (running.compareAndSet(false, true)) {
                try {
                    ticking = scheduler.schedulePeriodically(this::tick, sliceNanos, sliceNanos, TimeUnit.NANOSECONDS);
                } catch (RuntimeException refused) {
                    running.set(false);
                    throw refused;
                }
            }
        }

        private void tick() {
            for (Polled request; (request = incoming.poll()) != null; ) {
                if (count == polled.length) {
                    polled = java.util.Arrays.copyOf(polled, count * 2);
                }
                polled[count++] = request;
            }
            int kept = 0;
            for (int i = 0; i < count; i++) {
                Polled request = polled[i];
                if (!request.gone() && !request.pollFromDriver()) {
                    polled[kept++] = request;
                }
            }
            java.util.Arrays.fill(polled, kept, count, null);
            size.addAndGet(kept - count);
            count = kept;
            if (count == 0 && incoming.isEmpty()) {
                stop();
            }
        }

        /** Stops ticking; a registration racing the stop restarts it. */
        private void stop() {
            Disposable current = ticking;
            running.set(false);
            if (current != null) {
                current.dispose();
            }
            if (!incoming.isEmpty()) {
                startIfIdle();
            }
        }
    }
}
