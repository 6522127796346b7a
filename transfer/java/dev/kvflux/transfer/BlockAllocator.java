package dev.kvflux.transfer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * The KV blocks of one serving role: a fixed number of blocks, a free list, and for every block that is
 * not free its owner (a transfer id) and its state. Thread-safe; every method is short and never blocks
 * beyond the allocator's monitor.
 *
 * <h2>States</h2>
 * <ul>
 *   <li>{@link State#FREE}: on the free list, no owner.</li>
 *   <li>{@link State#ALLOCATED}: handed to a request that is running; no copy targets it yet.</li>
 *   <li>{@link State#WRITING}: a copy may target it or read from it (prefill posts its layers; decode has
 *       told prefill where to write).</li>
 *   <li>{@link State#QUARANTINED}: the request has ended but the peer has not said that its copies are
 *       terminal; the blocks stay out of use until {@link #release} or until the lease passes
 *       ({@link #reclaimExpired}).</li>
 * </ul>
 *
 * <h2>Invariants (tested)</h2>
 * <ol>
 *   <li>Every block is in exactly one state; the counts per state add up to the capacity.</li>
 *   <li>A block is FREE exactly when it has no owner and is on the free list.</li>
 *   <li>{@link #allocate} hands out only FREE blocks, all or none: when fewer than asked are free it
 *       throws {@link OutOfBlocksException} and changes nothing.</li>
 *   <li>All blocks of one owner share one state; an owner holds at most one grant at a time.</li>
 *   <li>A block leaves ALLOCATED or WRITING only through {@link #end} (to QUARANTINED, or FREE when the
 *       peer already released) or {@link #free}; it leaves QUARANTINED only through {@link #release},
 *       {@link #free} or {@link #reclaimExpired} at or after its lease deadline. So a block whose request
 *       ended is never handed out again before the peer's release or the lease.</li>
 *   <li>Every operation on an owner that holds nothing is a no-op that returns false or 0: a late or
 *       duplicate release changes nothing.</li>
 * </ol>
 */
public final class BlockAllocator {

    /** The state of one block. */
    public enum State { FREE, ALLOCATED, WRITING, QUARANTINED }

    /** Fewer blocks are free than a request needs; nothing was allocated. */
    public static final class OutOfBlocksException extends RuntimeException {
        OutOfBlocksException(String role, int asked, int free, int capacity) {
            super(asked > capacity
                    ? role + " has too few KV blocks for this request: it needs " + asked + " blocks, more than the "
                            + capacity + " it has in all; shorten the prompt or give the " + role + " more blocks"
                    : role + " is out of KV blocks: the request needs " + asked + " blocks, " + free + " of "
                            + capacity + " are free; retry later, lower the concurrency or the prompt length, or raise"
                            + " the " + role + "'s blocks", null, false, false);
        }
    }

    /** Counts per state, the oldest non-free grant's age, and lifetime counters. */
    public record Snapshot(Map<State, Integer> blocks, long oldestAgeMillis, long owners, long leaseExpired,
                    long refusedOutOfBlocks, long forcedFrees) {
        /** How many blocks are in {@code state}. */
        public int count(State state) {
            return blocks.getOrDefault(state, 0);
        }

        /** How many blocks are free. */
        public int free() {
            return count(State.FREE);
        }
    }

    private static final class Grant {
        final long[] blocks;
        State state = State.ALLOCATED;
        long since;
        long leaseDeadline;
        boolean released;

        Grant(long[] blocks, long since) {
            this.blocks = blocks;
            this.since = since;
        }
    }

    private final String role;
    private final int capacity;
    private final LongSupplier nanoClock;
    private final int[] freeList;
    private int freeCount;
    private final State[] state;
    private final String[] owner;
    private final Map<String, Grant> grants = new HashMap<>();
    private long leaseExpired;
    private long refused;
    private long forcedFrees;
    /** Told each owner's blocks as they become FREE (under this allocator's lock), a side's history; null for nobody. */
    private java.util.function.BiConsumer<String, List<Long>> onFree;

    /**
     * @param role the role's name for messages ("prefill", "decode")
     * @param capacity how many blocks there are
     * @param nanoClock the clock grants and leases are timed on, in nanoseconds
     * @throws IllegalArgumentException if {@code capacity} is not positive
     */
    public BlockAllocator(String role, int capacity, LongSupplier nanoClock) {
        if (capacity < 1) {
            throw new IllegalArgumentException("a KV cache needs at least 1 block, got " + capacity);
        }
        this.role = Objects.requireNonNull(role, "role");
        this.capacity = capacity;
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        this.freeList = new int[capacity];
        this.state = new State[capacity];
        this.owner = new String[capacity];
        for (int i = 0; i < capacity; i++) {
            freeList[i] = capacity - 1 - i;
            state[i] = State.FREE;
        }
        this.freeCount = capacity;
    }

    public int capacity() {
        return capacity;
    }

    /**
     * {@code count} FREE blocks for {@code owner}, now ALLOCATED.
     *
     * @throws OutOfBlocksException changing nothing, if fewer than {@code count} are free
     * @throws IllegalStateException if {@code owner} already holds blocks
     * @throws IllegalArgumentException if {@code count} is under 1
     */
    public synchronized List<Long> allocate(String owner, int count) {
        Objects.requireNonNull(owner, "owner");
        if (count < 1) {
            throw new IllegalArgumentException("a request needs at least 1 block, got " + count);
        }
        if (grants.containsKey(owner)) {
            throw new IllegalStateException(owner + " already holds KV blocks");
        }
        if (count > freeCount) {
            refused++;
            throw new OutOfBlocksException(role, count, freeCount, capacity);
        }
        long[] blocks = new long[count];
        List<Long> ids = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int block = freeList[--freeCount];
            state[block] = State.ALLOCATED;
            this.owner[block] = owner;
            blocks[i] = block;
            ids.add((long) block);
        }
        grants.put(owner, new Grant(blocks, nanoClock.getAsLong()));
        return List.copyOf(ids);
    }

    /** ALLOCATED → WRITING for the owner's blocks; false if it holds none or they are in another state. */
    public synchronized boolean writing(String owner) {
        Grant grant = grants.get(owner);
        if (grant == null || grant.state != State.ALLOCATED) {
            return false;
        }
        move(grant, State.WRITING);
        return true;
    }

    /**
     * The owner's request has ended: its blocks become FREE if the peer has already released them, else
     * QUARANTINED until {@link #release} or until {@code lease} from now (the lease counts from the request's end).
     *
     * @return the state the blocks are in now; FREE also when the owner held nothing
     */
    public synchronized State end(String owner, Duration lease) {
        return end(owner, lease, nanoClock.getAsLong());
    }

    /**
     * As {@link #end(String, Duration)}, with the lease counted from {@code notBeforeNanos} when that
     * is later than now: decode counts it from the request's receive deadline, the latest moment prefill may
     * still start the request's copies, so a request that ended early (its client left, the abort to prefill
     * was lost) cannot have its blocks reused under a copy prefill posts before its own deadline.
     */
    public synchronized State end(String owner, Duration lease, long notBeforeNanos) {
        Grant grant = grants.get(owner);
        if (grant == null) {
            return State.FREE;
        }
        if (grant.state == State.QUARANTINED) {
            return State.QUARANTINED;
        }
        if (grant.released) {
            freeGrant(owner, grant);
            return State.FREE;
        }
        move(grant, State.QUARANTINED);
        long now = nanoClock.getAsLong();
        grant.leaseDeadline = (notBeforeNanos - now > 0 ? notBeforeNanos : now) + lease.toNanos();
        return State.QUARANTINED;
    }

    /**
     * The peer says its copies into or out of the owner's blocks are terminal: QUARANTINED blocks become
     * FREE; blocks of a request still running are marked so that {@link #end} frees them.
     *
     * @return false if the owner held nothing (a late or duplicate release)
     */
    public synchronized boolean release(String owner) {
        Grant grant = grants.get(owner);
        if (grant == null) {
            return false;
        }
        if (grant.state == State.QUARANTINED) {
            freeGrant(owner, grant);
        } else {
            grant.released = true;
        }
        return true;
    }

    /**
     * Frees the owner's blocks whatever their state (prefill's source blocks once its copies are terminal).
     *
     * @return how many blocks were freed; 0 if the owner held nothing
     */
    public synchronized int free(String owner) {
        Grant grant = grants.get(owner);
        if (grant == null) {
            return 0;
        }
        freeGrant(owner, grant);
        return grant.blocks.length;
    }

    /** As {@link #free}, counted as a forced free: copies may still be in flight (they stalled). */
    public synchronized int forceFree(String owner) {
        int freed = free(owner);
        if (freed > 0) {
            forcedFrees++;
        }
        return freed;
    }

    /**
     * Frees every QUARANTINED grant whose lease deadline has passed.
     *
     * @return the owners whose blocks were reclaimed
     */
    public synchronized List<String> reclaimExpired() {
        long now = nanoClock.getAsLong();
        List<String> expired = new ArrayList<>();
        for (Map.Entry<String, Grant> e : grants.entrySet()) {
            if (e.getValue().state == State.QUARANTINED && now - e.getValue().leaseDeadline >= 0) {
                expired.add(e.getKey());
            }
        }
        for (String o : expired) {
            freeGrant(o, grants.get(o));
            leaseExpired++;
        }
        return expired;
    }

    /** The state of the owner's blocks; FREE if it holds none. */
    public synchronized State stateOf(String owner) {
        Grant grant = grants.get(owner);
        return grant == null ? State.FREE : grant.state;
    }

    /** The state of one block. */
    public synchronized State stateOfBlock(int block) {
        return state[block];
    }

    /** The owner of one block; null when it is FREE. */
    public synchronized String ownerOfBlock(int block) {
        return owner[block];
    }

    /** How many blocks are not FREE. */
    public synchronized int held() {
        return capacity - freeCount;
    }

    public synchronized Snapshot snapshot() {
        Map<State, Integer> counts = new EnumMap<>(State.class);
        for (State s : State.values()) {
            counts.put(s, 0);
        }
        long now = nanoClock.getAsLong();
        long oldest = 0;
        for (Grant grant : grants.values()) {
            counts.merge(grant.state, grant.blocks.length, Integer::sum);
            oldest = Math.max(oldest, now - grant.since);
        }
        counts.put(State.FREE, freeCount);
        return new Snapshot(counts, oldest / 1_000_000, grants.size(), leaseExpired, refused, forcedFrees);
    }

    private void move(Grant grant, State to) {
        grant.state = to;
        for (long b : grant.blocks) {
            state[(int) b] = to;
        }
    }

    /** Tells {@code onFree} each owner's blocks as they become FREE; it runs under this allocator's lock. */
    synchronized void onFree(java.util.function.BiConsumer<String, List<Long>> onFree) {
        this.onFree = Objects.requireNonNull(onFree, "onFree");
    }

    private void freeGrant(String owner, Grant grant) {
        grants.remove(owner);
        if (onFree != null) {
            onFree.accept(owner, java.util.Arrays.stream(grant.blocks).boxed().toList());
        }
        for (long b : grant.blocks) {
            state[(int) b] = State.FREE;
            this.owner[(int) b] = null;
            freeList[freeCount++] = (int) b;
        }
    }
}
