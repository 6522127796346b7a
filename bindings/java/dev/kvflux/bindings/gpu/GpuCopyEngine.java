package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.PushedStatus;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.internal.MoriWaitAll;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;

/**
 * A transfer engine over the HIP or CUDA runtime with MoRI xGMI's design. The destination registers its
 * buffer and sends its {@link GpuMemoryDescriptor} (with the IPC handle); the source registers that as a
 * remote region and opens the handle with lazy peer access. Each batch posts its block copies on a stream
 * from a pool and records one event from a pool (timing disabled); its status completes when a query of
 * that event says so, and only then. {@link #waitAll} is MoRI's {@code WaitAll}, exactly ({@link
 * TransferEngine#moriWaitAll}): a bounded wait polls a status once, sleeps to its deadline (the time left, truncated to
 * whole milliseconds) and polls again; an unbounded one synchronizes each batch's event.
 *
 * <p>On top of MoRI's model, a batch may be posted with push completion ({@link #push}, or per batch): a host
 * function behind the batch's event completes the status's {@link PushedStatus#pushed()} publisher, with no polling.
 *
 * <p>Thread-safe. Posting never blocks on the copies.
 */
public final class GpuCopyEngine implements DescribedEngine {

    /**
     * Pool sizes (MoRI's xGMI backend defaults to 64 streams and 64 events per device), the copy path and
     * how statuses learn that their batch is done.
     *
     * @param scatterGatherThreshold as MoRI's {@code MORI_IO_XGMI_SCATTER_GATHER_THRESHOLD}: {@link
     *     #SCATTER_GATHER_OFF} (unset) copies each merged segment with its own {@code cudaMemcpyAsync}; 0 sends
     *     every batch through the scatter/gather kernel (one launch per batch, CUDA only, needs the driver's
     *     {@code libcuda.so.1} and the PTX built into the jar); N sends batches of more than N blocks through it
     * @param sharedStreamProgress on (the default): statuses posted on one stream share what their queries
     *     saw (a later event seen ready settles earlier statuses; an earlier event just seen not ready answers
     *     for later ones; a status not answered so queries a later event on the stream first), so most status
     *     queries need no native event query, and posting makes none; off: each query of an in-flight status
     *     queries its own event, and posting polls the status once, as MoRI's xGMI backend does. Either way {@link
     *     GpuCopyEngine#eventQueries()} counts the native queries, so the two compare on the same workload.
     */
    public record Config(int streams, int events, int scatterGatherThreshold, boolean sharedStreamProgress) {
        /** The threshold that leaves the scatter/gather path off. */
        public static final int SCATTER_GATHER_OFF = -1;
        public static final Config DEFAULT = new Config(64, 64);

        public Config {
            if (streams < 1 || events < 0) {
                throw new IllegalArgumentException("a GPU copy engine needs at least one stream and no negative"
                        + " event count, got " + streams + " streams and " + events + " events");
            }
            if (scatterGatherThreshold < SCATTER_GATHER_OFF) {
                throw new IllegalArgumentException("the scatter/gather threshold is a block count (0: every batch)"
                        + " or " + SCATTER_GATHER_OFF + " (off), got " + scatterGatherThreshold);
            }
        }

        /** Pools of these sizes, this scatter/gather threshold, shared stream progress. */
        public Config(int streams, int events, int scatterGatherThreshold) {
            this(streams, events, scatterGatherThreshold, true);
        }

        /** Pools of these sizes, scatter/gather off, shared stream progress. */
        public Config(int streams, int events) {
            this(streams, events, SCATTER_GATHER_OFF);
        }

        /** These pools with the scatter/gather threshold {@code threshold} (see the record's description). */
        public Config withScatterGatherThreshold(int threshold) {
            return new Config(streams, events, threshold, sharedStreamProgress);
        }

        /** This config with the statuses' shared stream progress on or off (see the record's description). */
        public Config withSharedStreamProgress(boolean shared) {
            return new Config(streams, events, scatterGatherThreshold, shared);
        }

        /** Whether the scatter/gather path is on at all. */
        public boolean scatterGather() {
            return scatterGatherThreshold != SCATTER_GATHER_OFF;
        }

        /** Whether a batch of {@code blocks} blocks goes through the scatter/gather kernel. */
        public boolean scatterGather(int blocks) {
            return scatterGather() && blocks > scatterGatherThreshold;
        }
    }

    /** Segments a pooled metadata slot holds; a batch with more gets a slot of its own size. */
    static final int SLOT_SEGMENTS = 256;

    /**
     * How one batch is posted: wait on the GPU for {@code after} (a layer's event) before copying; record
     * {@code copyStart} / {@code copyEnd} (timing events the caller owns) around the copies; complete the
     * status by a host function ({@code push}). Any may be null / false.
     */
    public record WriteOptions(GpuEvent after, GpuEvent copyStart, GpuEvent copyEnd, boolean push) {
        public static final WriteOptions NONE = new WriteOptions(null, null, null, false);
    }

    private final GpuRuntime runtime;
    /** What {@link GpuSession#batchWrite} and {@link GpuSession#batchRead} post with ({@link #push}). */
    private volatile WriteOptions posting = WriteOptions.NONE;
    private final String key;
    private final int device;
    private final GpuStream[] streams;
    private final StreamProgress[] progress;
    private final LongAdder eventQueries = new LongAdder();
    private final AtomicLong nextStream = new AtomicLong();
    /** The batches' completion events (timing disabled). */
    private final GpuResourcePool<GpuEvent> events;
    /** What a status calls with its event once its batch is done: made once, not once per batch. */
    private final Consumer<LayerEvent> releaseEvent;
    private final AtomicLong nextUid = new AtomicLong();
    private final GpuRegions regions;
    private final MoriWaitAll.SystemClock clock = MoriWaitAll.systemClock();
    private final MoriWaitAll waitAll = new MoriWaitAll(clock, this::synchronize);
    /** Held shared by each waitAll, exclusively by close: no wait's last poll meets a destroyed event. */
    private final ReadWriteLock waitersAndClose = new ReentrantReadWriteLock();
    private final Config config;
    private final ScatterGatherKernel kernel;
    /** Scatter/gather metadata slots of {@link #SLOT_SEGMENTS} segments; a larger batch's slot is adopted. */
    private final GpuResourcePool<MetadataSlot> slots;

    private GpuCopyEngine(GpuRuntime runtime, String key, int device, Config config) {
        this.runtime = runtime;
        this.key = key;
        this.device = device;
        this.config = config;
        this.streams = new GpuStream[config.streams()];
        this.progress = new StreamProgress[config.streams()];
        this.regions = new GpuRegions(runtime, key, device);
        this.events = new GpuResourcePool<>(() -> runtime.createEvent(device, false));
        this.releaseEvent = e -> events.release((GpuEvent) e);
        this.slots = new GpuResourcePool<>(() -> new MetadataSlot(runtime, device, SLOT_SEGMENTS));
        ScatterGatherKernel loaded = null;
        try {
            for (int i = 0; i < streams.length; i++) {
                streams[i] = runtime.createStream(device);
                progress[i] = new StreamProgress(eventQueries, System::nanoTime, config.sharedStreamProgress());
            }
            events.fill(config.events());
            if (config.scatterGather()) {
                loaded = ScatterGatherKernel.loadOn(runtime, device);
                slots.fill(config.events());
            }
        } catch (RuntimeException e) {
            this.kernel = loaded;
            close();
            throw e;
        }
        this.kernel = loaded;
    }

    /** An engine named {@code key} copying from {@code device}, with MoRI's default pools. */
    public static GpuCopyEngine open(GpuRuntime runtime, String key, int device) {
        return open(runtime, key, device, Config.DEFAULT);
    }

    /** An engine named {@code key} copying from {@code device}. */
    public static GpuCopyEngine open(GpuRuntime runtime, String key, int device, Config config) {
        Objects.requireNonNull(runtime, "runtime");
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(config, "config");
        return new GpuCopyEngine(runtime, key, device, config);
    }

    @Override
    public String backend() {
        return runtime.platform().prefix();
    }

    public String key() {
        return key;
    }

    public int device() {
        return device;
    }

    public GpuRuntime runtime() {
        return runtime;
    }

    /**
     * Whether {@link GpuSession#batchWrite} and {@link GpuSession#batchRead} post with push completion from now on
     * (off until set): on, a host function behind each batch settles its status, so {@code PushWait} needs no poll;
     * off, only queries do, as on MoRI. {@link GpuSession#write} keeps its options; a batch keeps its mode.
     *
     * @throws IllegalStateException if {@code on} and {@link GpuRuntime#supportsHostFunctions()} is false
     */
    public GpuCopyEngine push(boolean on) {
        if (on && !runtime.supportsHostFunctions()) {
            throw new IllegalStateException(runtime + " has no host functions: its batches cannot push completion");
        }
        posting = on ? new WriteOptions(null, null, null, true) : WriteOptions.NONE;
        return this;
    }

    /** Whether batchWrite and batchRead post with push completion now ({@link #push}). */
    public boolean pushes() {
        return posting.push();
    }

    /** The pools and copy path this engine was opened with. */
    public Config config() {
        return config;
    }

    /**
     * Allocates {@code size} zeroed bytes on this engine's device and exports them for IPC.
     *
     * @throws IllegalArgumentException if {@code device} is not this engine's device
     */
    @Override
    public MemoryRegion registerMemory(long size, int device) {
        if (device != this.device) {
            throw new IllegalArgumentException("this GPU copy engine works on device " + this.device
                    + ", not " + device + "; open one engine per device");
        }
        return regions.register(size);
    }

    /** The device buffer behind a region this engine registered (to fill it, or read it back). */
    public DeviceBuffer buffer(MemoryRegion local) {
        return regions.buffer(local);
    }

    /** The descriptor to send to the peer for a region this engine registered. */
    public GpuMemoryDescriptor describe(MemoryRegion local) {
        return regions.describe(local);
    }

    /** Registers a region the peer described; its IPC handle is opened when a session first needs it. */
    public MemoryRegion registerRemote(GpuMemoryDescriptor remote) {
        return regions.registerRemote(remote);
    }

    /** The engine's key: a GPU copy engine needs nothing more of its peer than the region's descriptor. */
    @Override
    public byte[] engineDescriptor() {
        return key.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public byte[] memoryDescriptor(MemoryRegion local) {
        return describe(local).pack();
    }

    @Override
    public MemoryRegion importPeer(byte[] engineDescriptor, byte[] memoryDescriptor) {
        Objects.requireNonNull(engineDescriptor, "engineDescriptor");
        GpuMemoryDescriptor remote = GpuMemoryDescriptor.unpack(memoryDescriptor);
        if (!remote.engineKey().equals(new String(engineDescriptor, StandardCharsets.UTF_8))) {
            throw new IllegalArgumentException("the memory descriptor names engine '" + remote.engineKey()
                    + "', not the engine described");
        }
        return registerRemote(remote);
    }

    /** Closes the IPC mapping of the peer's buffer behind {@code remote}, if it was opened. */
    @Override
    public void forgetPeer(MemoryRegion remote) {
        regions.forget(remote);
    }

    @Override
    public int peersImported() {
        return regions.remoteCount();
    }

    /** How many peers' buffers are mapped here through IPC now. */
    public int openMappings() {
        return regions.openCount();
    }

    @Override
    public GpuSession createSession(MemoryRegion local, MemoryRegion remote) {
        long localBase = regions.buffer(local).address();
        return new GpuSession(local, remote, localBase, regions.open(remote).address());
    }

    @Override
    public StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        Lock shared = waitersAndClose.readLock();
        shared.lock();
        try {
            return waitAll.waitAll(statuses, timeoutMs);
        } finally {
            shared.unlock();
        }
    }

    /**
     * The unbounded wait's block, MoRI's wait callback: synchronize this engine's batch's event; a
     * status from elsewhere (or one the synchronize left in flight) is polled every millisecond.
     */
    private boolean synchronize(TransferStatus status) {
        if (status instanceof GpuTransferStatus batch) {
            batch.awaitTerminal();
            if (batch.code() != StatusCode.IN_PROGRESS) {
                return !Thread.currentThread().isInterrupted();
            }
        }
        return clock.sleepUntil(clock.nanoTime() + 1_000_000);
    }

    /**
     * Native queries of batch completion events made so far by this engine's statuses: with the streams'
     * shared progress ({@link Config#sharedStreamProgress()}), far fewer than status queries; without it,
     * one per query of an in-flight status.
     */
    public long eventQueries() {
        return eventQueries.sum();
    }

    /** Events in the completion pool now (idle ones; in-flight batches hold the rest). */
    public int idleEvents() {
        return events.idleCount();
    }

    @Override
    public void close() {
        clock.close(); // wakes every waitAll asleep on this engine; their last polls finish before we destroy
        Lock exclusive = waitersAndClose.writeLock();
        exclusive.lock();
        try {
            release();
        } finally {
            exclusive.unlock();
        }
    }

    /**
     * Frees everything, in this order: the peers' mapped buffers, this engine's buffers, the events, the
     * metadata slots, the kernel, the streams. A failure does not stop the rest; the first is thrown.
     */
    private void release() {
        List<AutoCloseable> all = new ArrayList<>();
        all.add(regions::closeAll);
        all.add(events::closeAll);
        all.add(slots::closeAll);
        if (kernel != null) {
            all.add(kernel);
        }
        for (GpuStream s : streams) {
            if (s != null) {
                all.add(s);
            }
        }
        GpuResourcePool.closeEach(all);
    }

    /** A pooled slot for {@code segments} segments, or a new one; a batch larger than the pool's gets its own. */
    private MetadataSlot acquireSlot(int segments) {
        return segments > SLOT_SEGMENTS ? slots.adopt(new MetadataSlot(runtime, device, segments)) : slots.acquire();
    }

    /** Back to the pool, or, if it was a larger batch's own, freed. */
    private void releaseSlot(MetadataSlot slot) {
        if (slot.capacity() == SLOT_SEGMENTS) {
            slots.release(slot);
        } else {
            slots.discard(slot);
        }
    }

    /** One local × remote pair: posts batches as MoRI's {@code IOEngineSession} does. */
    public final class GpuSession implements TransferSession {
        private final MemoryRegion local;
        private final MemoryRegion remote;
        private final long localBase;
        private final long remoteBase;

        GpuSession(MemoryRegion local, MemoryRegion remote, long localBase, long remoteBase) {
            this.local = local;
            this.remote = remote;
            this.localBase = localBase;
            this.remoteBase = remoteBase;
        }

        @Override
        public long allocateTransferUid() {
            return nextUid.getAndIncrement();
        }

        @Override
        public PushedStatus batchWrite(BatchPlan plan, long transferUid) {
            return write(plan, transferUid, posting);
        }

        @Override
        public PushedStatus batchRead(BatchPlan plan, long transferUid) {
            return post(plan, transferUid, posting, false);
        }

        /** {@link #batchWrite} with the options: a layer event to wait for, timing events, push. */
        public PushedStatus write(BatchPlan plan, long transferUid, WriteOptions options) {
            return post(plan, transferUid, options, true);
        }

        @Override
        public MemoryRegion local() {
            return local;
        }

        @Override
        public MemoryRegion remote() {
            return remote;
        }

        private PushedStatus post(BatchPlan plan, long transferUid, WriteOptions options, boolean write) {
            Objects.requireNonNull(options, "options");
            plan.checkWithin(local.size(), remote.size());
            CopyPlan copies = CopyPlan.of(plan);
            GpuTransferStatus status = new GpuTransferStatus(transferUid, plan.totalBytes());
            boolean gather = kernel != null && copies.copies() > 0 && config.scatterGather(plan.blocks());
            GpuEvent done = null;
            MetadataSlot slot = null;
            try {
                runtime.setDevice(device);
                done = events.acquire();
                slot = gather ? acquireSlot(copies.copies()) : null;
                int streamIndex = (int) (nextStream.getAndIncrement() % streams.length);
                GpuStream stream = streams[streamIndex];
                synchronized (stream) {
                    if (slot != null) {
                        // Uploaded before the wait for the layer, so the copy itself never waits for it.
                        slot.upload(copies.metadata(write), stream);
                    }
                    if (options.after() != null) {
                        stream.waitEvent(options.after());
                    }
                    if (options.copyStart() != null) {
                        options.copyStart().record(stream);
                    }
                    if (slot != null) {
                        kernel.launch(stream, write ? localBase : remoteBase, write ? remoteBase : localBase,
                                slot.deviceAddress(), copies.copies(), copies.largest());
                    } else {
                        copyEach(stream, copies, write);
                    }
                    if (options.copyEnd() != null) {
                        options.copyEnd().record(stream);
                    }
                    done.record(stream);
                    MetadataSlot held = slot;
                    StreamProgress onStream = progress[streamIndex];
                    status.posted(done, held == null ? releaseEvent : e -> {
                        releaseEvent.accept(e);
                        releaseSlot(held);
                    }, done::synchronize, onStream, onStream.nextSequence());
                    done = null;
                    slot = null;
                    if (options.push()) {
                        status.pushedBy(HostFunctions.launchTimed(runtime, stream, status::hostFunctionRan));
                    }
                }
            } catch (RuntimeException failed) {
                if (done != null) {
                    events.release(done);
                }
                if (slot != null) {
                    // Its upload may be queued: freeing it waits for that, so no later batch overwrites it early.
                    slots.discard(slot);
                }
                status.fail(StatusCode.ERR_GPU_OP, failed.getMessage());
            }
            status.afterPosting();
            return status;
        }

        /** One {@code cudaMemcpyAsync} per merged segment. */
        private void copyEach(GpuStream stream, CopyPlan copies, boolean write) {
            long[] lo = copies.localOffsets();
            long[] ro = copies.remoteOffsets();
            long[] sz = copies.sizes();
            for (int i = 0; i < sz.length; i++) {
                if (write) {
                    stream.copyAsync(remoteBase + ro[i], localBase + lo[i], sz[i]);
                } else {
                    stream.copyAsync(localBase + lo[i], remoteBase + ro[i], sz[i]);
                }
            }
        }
    }
}
