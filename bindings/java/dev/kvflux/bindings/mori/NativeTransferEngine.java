package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.mori.internal.HostMemory;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link TransferEngine} over a native MoRI IO library through FFM: the simulator
 * ({@link #simulated}, backend {@code native-sim}) or the real MoRI ({@link #mori}, backend {@code mori}),
 * each with an xGMI backend.
 *
 * <p>Peers meet as MoRI's do, through packed descriptors: {@link #exportEngine()} and
 * {@link #exportMemory} on one side, {@link #importEngine} and {@link #importMemory} on the other (or
 * {@link #connect} for two engines in one process). Host memory registered through
 * {@link #registerMemory(long, int)} is allocated (zeroed) and freed by this engine. Statuses are
 * {@link MoriStatus}es; {@link #close()} releases every native handle it still has, statuses included.
 */
public final class NativeTransferEngine implements DescribedEngine {
    private final MoriIo io;
    private final MoriEngine engine;
    private final String backend;
    private final Map<MemoryRegion, Local> locals = new ConcurrentHashMap<>();
    private final Map<MemoryRegion, MoriMemory> remotes = new ConcurrentHashMap<>();
    /** Sessions into each imported region, closed when it is forgotten. */
    private final Map<MemoryRegion, List<MoriSession>> sessions = new ConcurrentHashMap<>();
    /** Peer engines registered through {@link #importPeer}, by their packed descriptor. */
    private final Set<String> peerEngines = ConcurrentHashMap.newKeySet();

    private record Local(MoriMemory memory, MemorySegment buffer, boolean owned) {
    }

    private NativeTransferEngine(MoriIo io, String key, String host, int port, String backend) {
        this.io = io;
        this.backend = backend;
        this.engine = io.createEngine(key, host, port);
        try {
            engine.createXgmiBackend();
        } catch (RuntimeException e) {
            engine.close();
            throw e;
        }
    }

    /** An engine on the simulator that ships in the jar (backend {@code native-sim}). */
    public static NativeTransferEngine simulated(String key) {
        return new NativeTransferEngine(MoriIo.simulator(), key, "127.0.0.1", 0, "native-sim");
    }

    /** An engine on the real MoRI through {@code libkvflux_mori.so} (backend {@code mori}); see {@link MoriIo#mori()}. */
    public static NativeTransferEngine mori(String key, String host, int port) {
        return new NativeTransferEngine(MoriIo.mori(), key, host, port, "mori");
    }

    @Override
    public String backend() {
        return backend;
    }

    /** The native engine, for what this interface does not cover. */
    public MoriEngine engine() {
        return engine;
    }

    /**
     * How many native handles (engines, memory, sessions, statuses) are open in the library, every engine of this
     * process together; empty if the library keeps no count.
     */
    public java.util.OptionalLong liveHandles() {
        return io.liveHandles();
    }

    /** The simulator's controls when this engine runs on it. */
    public Optional<MoriSimulator> simulator() {
        return io.simulatorControls();
    }

    /**
     * Allocates {@code size} zeroed bytes of host memory and registers them.
     *
     * @throws UnsupportedOperationException for a device other than -1: allocate device memory with the
     *     GPU runtime binding and register it with {@link #registerMemory(MemorySegment, int, MemoryLocation)}
     */
    @Override
    public MemoryRegion registerMemory(long size, int device) {
        if (device != -1) {
            throw new UnsupportedOperationException("this engine allocates host memory only (device -1), got device "
                    + device + "; allocate device memory with the GPU runtime binding and pass it to"
                    + " registerMemory(MemorySegment, device, MemoryLocation.GPU)");
        }
        MemorySegment buffer = allocateHost(size);
        try {
            return register(buffer, device, MemoryLocation.CPU, true);
        } catch (RuntimeException e) {
            freeHost(buffer);
            throw e;
        }
    }

    /** Registers memory the caller owns; it must stay valid until this engine is closed. */
    public MemoryRegion registerMemory(MemorySegment data, int device, MemoryLocation location) {
        return register(data, device, location, false);
    }

    private MemoryRegion register(MemorySegment data, int device, MemoryLocation location, boolean owned) {
        MoriMemory memory = engine.registerMemory(data, device, location);
        locals.put(memory.region(), new Local(memory, data, owned));
        return memory.region();
    }

    /** The bytes of a region registered here (for filling and checking buffers). */
    public MemorySegment buffer(MemoryRegion local) {
        return local(local).buffer();
    }

    /** This engine's packed {@code EngineDesc}. */
    public byte[] exportEngine() {
        return engine.packDescriptor();
    }

    /** Registers a peer engine from its packed {@code EngineDesc}. */
    public void importEngine(byte[] packedEngineDesc) {
        engine.registerRemoteEngine(packedEngineDesc);
    }

    /** The packed {@code MemoryDesc} of a region registered here. */
    public byte[] exportMemory(MemoryRegion local) {
        return local(local).memory().pack();
    }

    /** A peer's region from its packed {@code MemoryDesc}, usable as the remote side of a session. */
    public MemoryRegion importMemory(byte[] packedMemoryDesc) {
        MoriMemory memory = engine.unpackMemory(packedMemoryDesc);
        MoriMemory previous = remotes.putIfAbsent(memory.region(), memory);
        if (previous != null) {
            memory.close();
        }
        return memory.region();
    }

    /** Makes each engine know the other (both live in this process). */
    public void connect(NativeTransferEngine peer) {
        importEngine(peer.exportEngine());
        peer.importEngine(exportEngine());
    }

    @Override
    public TransferSession createSession(MemoryRegion local, MemoryRegion remote) {
        Objects.requireNonNull(remote, "remote");
        MoriMemory remoteMemory = remotes.get(remote);
        if (remoteMemory == null && locals.containsKey(remote)) {
            remoteMemory = locals.get(remote).memory();
        }
        if (remoteMemory == null) {
            throw new IllegalArgumentException("remote region " + remote + " is not known to engine '" + engine.key()
                    + "'; pass the peer's packed MemoryDesc (exportMemory on its side) to importMemory first");
        }
        MoriSession session = engine.createSession(local(local).memory(), remoteMemory);
        if (remotes.containsKey(remote)) {
            sessions.computeIfAbsent(remote, r -> new CopyOnWriteArrayList<>()).add(session);
        }
        return session;
    }

    @Override
    public byte[] engineDescriptor() {
        return exportEngine();
    }

    @Override
    public byte[] memoryDescriptor(MemoryRegion local) {
        return exportMemory(local);
    }

    /**
     * {@inheritDoc}
     *
     * @throws MoriIoException if the library refuses a descriptor (its text says why)
     */
    @Override
    public MemoryRegion importPeer(byte[] engineDescriptor, byte[] memoryDescriptor) {
        Objects.requireNonNull(engineDescriptor, "engineDescriptor");
        Objects.requireNonNull(memoryDescriptor, "memoryDescriptor");
        String key = HexFormat.of().formatHex(engineDescriptor);
        if (!peerEngines.contains(key)) {
            importEngine(engineDescriptor);
            peerEngines.add(key);
        }
        return importMemory(memoryDescriptor);
    }

    @Override
    public void forgetPeer(MemoryRegion remote) {
        List<MoriSession> into = sessions.remove(remote);
        if (into != null) {
            into.forEach(MoriSession::close);
        }
        MoriMemory memory = remotes.remove(remote);
        if (memory != null) {
            memory.close();
        }
    }

    @Override
    public int peersImported() {
        return remotes.size();
    }

    /**
     * {@inheritDoc}
     *
     * @throws IllegalArgumentException if a status is not a {@link MoriStatus}
     */
    @Override
    public StatusCode waitAll(List<? extends TransferStatus> statuses, long timeoutMs) {
        List<MoriStatus> natives = new ArrayList<>(statuses.size());
        for (TransferStatus status : statuses) {
            if (status != null && !(status instanceof MoriStatus)) {
                throw new IllegalArgumentException("status " + status + " did not come from a native engine; "
                        + "waitAll takes the statuses this engine's sessions returned");
            }
            natives.add((MoriStatus) status);
        }
        int timeout = (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, timeoutMs));
        return engine.waitAll(natives, timeout);
    }

    /** Destroys the native engine (releasing every handle still open on it), then frees the host buffers. */
    @Override
    public void close() {
        engine.close();
        for (Local local : locals.values()) {
            if (local.owned()) {
                freeHost(local.buffer());
            }
        }
        locals.clear();
        remotes.clear();
        sessions.clear();
    }

    /** On the simulator, host memory an engine of another process can reach (as a GPU's through IPC). */
    private MemorySegment allocateHost(long size) {
        return io.sim().isPresent() ? io.sim().get().hostAlloc(size) : HostMemory.allocate(size);
    }

    private void freeHost(MemorySegment buffer) {
        io.sim().ifPresentOrElse(sim -> sim.hostFree(buffer), () -> HostMemory.free(buffer));
    }

    private Local local(MemoryRegion region) {
        Objects.requireNonNull(region, "region");
        Local local = locals.get(region);
        if (local == null) {
            throw new IllegalArgumentException("region " + region + " was not registered on engine '" + engine.key()
                    + "'; use a region this engine's registerMemory returned");
        }
        return local;
    }

    @Override
    public String toString() {
        return "NativeTransferEngine[" + backend + ", " + engine.key() + "]";
    }
}
