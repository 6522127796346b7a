package dev.kvflux.bindings.sim;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.DurationText;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.internal.MoriWaitAll;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.scheduler.Scheduler;

/**
 * MoRI's xGMI backend, simulated in pure Java: the embedded default engine of kvflux.
 *
 * <h2>Completion model (as MoRI over xGMI)</h2>
 * <ul>
 *   <li>{@code batchWrite}/{@code batchRead} post one batch and return its one status, IN_PROGRESS. No
 *       bytes move: the engine computes when the copy finishes (see {@link CopyTiming}; copies are
 *       serialized on the link in posting order).</li>
 *   <li>A status turns terminal only when something queries it ({@link TransferStatus#code()}) at or
 *       after its copy's finish time. Nothing completes it in the background.</li>
 *   <li>{@link #waitAll} is MoRI's, exactly ({@link TransferEngine#moriWaitAll}). {@code timeoutMs == 0} polls each
 *       status once. {@code timeoutMs > 0} waits the statuses in order against one deadline, each with
 *       the time left truncated to whole milliseconds: it polls once and, if the status is still in
 *       flight, sleeps to that status's deadline and polls again, because nothing wakes a sleeping xGMI
 *       wait. So the first status in flight costs (nearly) the whole timeout, and the rest get what is
 *       left of the last millisecond: under virtual time nothing is left, and the wait returns
 *       IN_PROGRESS although every copy has finished; in real time they are polled once each and the
 *       wait returns SUCCESS just under the deadline if they fit. A failure seen before then wins.
 *       {@code timeoutMs < 0} blocks until every status is terminal. A status never posted (INIT) is
 *       the failure ERR_BAD_STATE.</li>
 *   <li>Failures are sticky: once a status failed it stays failed.</li>
 * </ul>
 *
 * <h2>Time</h2>
 * The clock is a Reactor {@link Scheduler}'s {@code now(NANOSECONDS)} when one is set, so a
 * {@code VirtualTimeScheduler} drives the whole engine; unset, it is real time with nanosecond resolution
 * ({@link System#nanoTime()}; a sleep parks the thread), as MoRI's {@code steady_clock}. Set no Reactor
 * scheduler of your own for real time: their {@code now} is the wall clock in whole milliseconds, which
 * would turn every bounded wait's time left into whole milliseconds. With a scheduler set, the blocking
 * sleep inside {@code waitAll} schedules its wake-up on that scheduler: under virtual time it ends when another
 * thread advances the clock past the deadline, so run the blocking call on a real thread
 * ({@code Schedulers.boundedElastic()}) and advance time from the test thread;
 * {@link #sleepingWaits()} tells when the call has gone to sleep.
 *
 * <h2>Faults</h2>
 * {@link Fault}s chosen by batch ordinal make a batch fail with a given code and message at a given time
 * after its post, complete a given time late, or never complete.
 *
 * <h2>Scatter/gather under load</h2>
 * With {@link CopyPath#SCATTER_GATHER}, a batch's copy is a kernel on the compute queue.
 * {@link #prefillStepQueued(Duration)} tells the engine that prefill has just queued a step of the given
 * length on the GPU; steps run one after another. A copy that would finish while a step is queued or
 * running (the step was queued at or before the copy's finish and ends after it) becomes observable only
 * when the last such step ends. Steps queued after the copy finished delay it no further: the copy's
 * kernel is already ahead of them on the GPU, so a busy prefill delays a copy by at most the steps
 * already queued, never for as long as it stays busy. On the default path the copy engines do not share
 * the compute queue and prefill steps change nothing.
 *
 * <p>Thread-safe: sessions may post from any thread, statuses may be queried from any thread.
 */
public final class SimulatedXgmiEngine implements DescribedEngine {
    /** The backend name reports print. */
    public static final String BACKEND = "sim-xgmi";

    private static final AtomicInteger ENGINES = new AtomicInteger();

    private final String engineKey;
    private final SimClock clock;
    private final CopyTiming timing;
    private final CopyPath copyPath;
    private final Map<Long, Fault> faults;
    private final Map<Integer, MemoryRegion> regions = new ConcurrentHashMap<>();
    private final AtomicInteger nextRegion = new AtomicInteger();
    /** Peers' regions imported through {@link #importPeer}. */
    private final Set<MemoryRegion> peers = ConcurrentHashMap.newKeySet();
    private final AtomicLong nextUid = new AtomicLong();
    private final List<long[]> prefillSteps = new ArrayList<>();
    private long ordinals;
    private long hostFreeAt = Long.MIN_VALUE;
    private long linkFreeAt = Long.MIN_VALUE;
    private long stepsEndAt = Long.MIN_VALUE;
    private final MoriWaitAll waitAll;
    private volatile boolean closed;

    private SimulatedXgmiEngine(Builder b) {
        this.engineKey = b.engineKey != null ? b.engineKey : BACKEND + "-" + ENGINES.incrementAndGet();
        this.clock = b.scheduler != null ? SimClock.of(b.scheduler) : SimClock.realTime();
        this.timing = b.timing;
        this.copyPath = b.copyPath;
        this.faults = Map.copyOf(b.faults);
        this.waitAll = new MoriWaitAll(clock, this::sleepToNextChange);
    }

    /** An engine with the MI355X timing on the default copy path, in real time. */
    public static SimulatedXgmiEngine create() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public String backend() {
        return BACKEND;
    }

    public String engineKey() {
        return engineKey;
    }

    public CopyTiming timing() {
        return timing;
    }

    public CopyPath copyPath() {
        return copyPath;
    }

    /** No buffer is allocated: the region is bookkeeping for bounds checks. */
    @Override
    public MemoryRegion registerMemory(long size, int device) {
        checkOpen();
        MemoryRegion region = new MemoryRegion(engineKey, nextRegion.getAndIncrement(), size, device);
        regions.put(region.id(), region);
        return region;
    }

    /**
     * A session from one of this engine's regions to any region (a peer's, or another of this engine's).
     *
     * @throws IllegalArgumentException if {@code local} was not registered with this engine
     */
    @Override
    public TransferSession createSession(MemoryRegion local, MemoryRegion remote) {
        checkOpen();
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(remote, "remote");
        if (!local.equals(regions.get(local.id())) || !local.engineKey().equals(engineKey)) {
            throw new IllegalArgumentException("local region " + local + " was not registered with engine "
                    + engineKey + "; register it with this engine's registerMemory first");
        }
        return new SimSession(this, local, remote);
    }

    /** {@code sim-xgmi KEY}: the simulator's engine descriptor. */
    @Override
    public byte[] engineDescriptor() {
        return (BACKEND + " " + engineKey).getBytes(StandardCharsets.UTF_8);
    }

    /** {@code sim-xgmi KEY ID SIZE DEVICE}: the simulator's memory descriptor (no bytes exist to map). */
    @Override
    public byte[] memoryDescriptor(MemoryRegion local) {
        Objects.requireNonNull(local, "local");
        if (!local.equals(regions.get(local.id())) || !local.engineKey().equals(engineKey)) {
            throw new IllegalArgumentException("region " + local + " was not registered with engine " + engineKey);
        }
        return (BACKEND + " " + engineKey + " " + local.id() + " " + local.size() + " " + local.device())
                .getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public MemoryRegion importPeer(byte[] engineDescriptor, byte[] memoryDescriptor) {
        String[] engine = fields(engineDescriptor, 2, "engine");
        String[] memory = fields(memoryDescriptor, 5, "memory");
        if (!engine[1].equals(memory[1])) {
            throw new IllegalArgumentException("the memory descriptor names engine '" + memory[1]
                    + "', not the engine described, '" + engine[1] + "'");
        }
        try {
            MemoryRegion region = new MemoryRegion(memory[1], Integer.parseInt(memory[2]), Long.parseLong(memory[3]),
                    Integer.parseInt(memory[4]));
            peers.add(region);
            return region;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a sim-xgmi memory descriptor: " + e.getMessage(), e);
        }
    }

    private static String[] fields(byte[] descriptor, int count, String what) {
        Objects.requireNonNull(descriptor, what + "Descriptor");
        if (descriptor.length > 512) {
            throw new IllegalArgumentException("a sim-xgmi " + what + " descriptor is at most 512 bytes, got "
                    + descriptor.length);
        }
        String[] fields = new String(descriptor, StandardCharsets.UTF_8).split(" ", -1);
        if (fields.length != count || !fields[0].equals(BACKEND)) {
            throw new IllegalArgumentException("not a sim-xgmi " + what + " descriptor (" + count
                    + " fields starting with 'sim-xgmi'); was it made by another backend?");
        }
        return fields;
    }

    @Override
    public void forgetPeer(MemoryRegion remote) {
        peers.remove(remote);
    }

    @Override
    public int peersImported() {
        return peers.size();
    }

    /**
     * Tells the engine that prefill has just queued a step of {@code length} on the GPU (see the class
     * comment). Steps run in the order they are queued; a step queued while another is pending starts
     * when that one ends. Only the {@linkplain CopyPath#SCATTER_GATHER scatter/gather path} is affected.
     *
     * @return when the step ends, in the engine's clock nanoseconds
     */
    public long prefillStepQueued(Duration length) {
        Objects.requireNonNull(length, "length");
        if (length.isNegative() || length.isZero()) {
            throw new IllegalArgumentException("a prefill step must last a positive time, got "
                    + DurationText.of(length));
        }
        synchronized (prefillSteps) {
            long now = clock.now();
            forgetStepsEndedBefore(now);
            long end = Math.max(now, stepsEndAt) + length.toNanos();
            prefillSteps.add(new long[] {now, end});
            stepsEndAt = end;
            return end;
        }
    }

    /**
     * Drops the steps that ended before {@code now}, so a long-running server keeps only the few steps
     * still queued or running. Nothing observable changes: a dropped step could only move a copy's
     * observable time to a moment that has already passed, and a query compares with now.
     */
    private void forgetStepsEndedBefore(long now) {
        int ended = 0;
        while (ended < prefillSteps.size() && prefillSteps.get(ended)[1] < now) {
            ended++;
        }
        prefillSteps.subList(0, ended).clear();
    }

    /** Steps kept for the scatter/gather model: those queued or running, and none that ended. */
    int prefillStepsKept() {
        synchronized (prefillSteps) {
            return prefillSteps.size();
        }
    }

    /** How many threads are asleep inside {@link #waitAll} right now (for tests and progress displays). */
    public int sleepingWaits() {
        return clock.sleepers();
    }

    /** How many batches the engine has accepted. */
    public synchronized long batchesPosted() {
        return ordinals;
    }

    /**
     * When a status of this engine finished its copy on the link, in clock nanoseconds, or empty for a
     * status from elsewhere, a stalled one or a failing one. On the scatter/gather path under load the
     * status is observable only later ({@link #observableAt}).
     */
    public OptionalLong copyFinishedAt(TransferStatus status) {
        if (status instanceof SimStatus s && s.finishAt() != SimStatus.NEVER) {
            return OptionalLong.of(s.finishAt());
        }
        return OptionalLong.empty();
    }

    /** The engine's clock, in nanoseconds. */
    public long nowNanos() {
        return clock.now();
    }

    /** MoRI's {@code WaitAll} ({@link TransferEngine#moriWaitAll}) on this engine's clock; see the class comment. */
    @Override
    public StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        return waitAll.waitAll(statuses, timeoutMs);
    }

    /** Closes the engine: no more posts, and every sleep inside {@link #waitAll} ends at once. */
    @Override
    public void close() {
        closed = true;
        clock.close();
    }

    /**
     * The unbounded wait's block (xGMI's wait callback synchronizes the event): sleep to when the status
     * next changes, which is when its copy becomes observable or its fault fires.
     */
    private boolean sleepToNextChange(TransferStatus status) {
        long wake = status instanceof SimStatus s ? s.nextChangeAt() : clock.now() + 1_000_000;
        return clock.sleepUntil(wake);
    }

    SimClock clock() {
        return clock;
    }

    long allocateUid() {
        return nextUid.getAndIncrement();
    }

    /** Accepts one batch: bounds, ordinal, fault, timing; then queries the status once, as MoRI does. */
    SimStatus post(SimSession session, BatchPlan plan) {
        checkOpen();
        Objects.requireNonNull(plan, "plan");
        plan.checkWithin(session.local().size(), session.remote().size());
        SimStatus status;
        long bytes = plan.totalBytes();
        synchronized (this) {
            long ordinal = ordinals++;
            long now = clock.now();
            long submitted = Math.max(now, hostFreeAt) + timing.postNanos(plan.blocks());
            hostFreeAt = submitted;
            long finish = Math.max(submitted, linkFreeAt) + timing.linkNanos(copyPath, plan.blocks(), plan.totalBytes());
            linkFreeAt = finish;
            Fault fault = faults.get(ordinal);
            if (fault == null) {
                status = new SimStatus(this, ordinal, now, finish, SimStatus.NEVER, null, "", bytes);
            } else if (fault.kind() == Fault.Kind.SLOW) {
                status = new SimStatus(this, ordinal, now, finish + fault.afterPost().toNanos(), SimStatus.NEVER,
                        null, "", bytes);
            } else if (fault.kind() == Fault.Kind.STALL) {
                status = new SimStatus(this, ordinal, now, SimStatus.NEVER, SimStatus.NEVER, null, "", bytes);
            } else {
                status = new SimStatus(this, ordinal, now, SimStatus.NEVER, now + fault.afterPost().toNanos(),
                        fault.code(), fault.message(), bytes);
            }
        }
        status.code();
        return status;
    }

    /** When a copy that finishes at {@code finish} can first be seen by a query. */
    long observableAt(long finish) {
        if (copyPath != CopyPath.SCATTER_GATHER) {
            return finish;
        }
        synchronized (prefillSteps) {
            long at = finish;
            int lo = 0;
            int hi = prefillSteps.size();
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (prefillSteps.get(mid)[1] <= at) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            for (int i = lo; i < prefillSteps.size(); i++) {
                long[] step = prefillSteps.get(i);
                if (step[0] > finish) {
                    break;
                }
                at = Math.max(at, step[1]);
            }
            return at;
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("engine " + engineKey + " is closed; create a new one");
        }
    }

    /** Settings for a {@link SimulatedXgmiEngine}. */
    public static final class Builder {
        private Scheduler scheduler;
        private CopyTiming timing = CopyTiming.MI355X_XGMI;
        private CopyPath copyPath = CopyPath.DEFAULT;
        private final Map<Long, Fault> faults = new HashMap<>();
        private String engineKey;

        private Builder() {
        }

        /**
         * The clock (and the sleeps of {@code waitAll}), for virtual time; default: real time
         * ({@link System#nanoTime()}, a sleep parks the thread).
         */
        public Builder scheduler(Scheduler scheduler) {
            this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
            return this;
        }

        public Builder timing(CopyTiming timing) {
            this.timing = Objects.requireNonNull(timing, "timing");
            return this;
        }

        public Builder copyPath(CopyPath copyPath) {
            this.copyPath = Objects.requireNonNull(copyPath, "copyPath");
            return this;
        }

        /**
         * Adds a fault; at most one per batch ordinal.
         *
         * @throws IllegalArgumentException if that batch already has a fault
         */
        public Builder fault(Fault fault) {
            Objects.requireNonNull(fault, "fault");
            if (faults.putIfAbsent(fault.batchOrdinal(), fault) != null) {
                throw new IllegalArgumentException("batch " + fault.batchOrdinal()
                        + " already has a fault; give each batch at most one");
            }
            return this;
        }

        public Builder engineKey(String engineKey) {
            this.engineKey = Objects.requireNonNull(engineKey, "engineKey");
            return this;
        }

        public SimulatedXgmiEngine build() {
            return new SimulatedXgmiEngine(this);
        }
    }
}
