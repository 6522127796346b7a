package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.MemoryRegion;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The memory a {@link GpuCopyEngine} knows: the regions it registered (device buffers it allocated and
 * exported for IPC), the peers' regions registered from their descriptors, and the peers' buffers mapped
 * here, each IPC handle opened once, when a session first needs it. {@link #closeAll} unmaps the peers'
 * buffers, then frees this engine's own, and forgets them all but the peers' descriptors. Thread-safe.
 */
final class GpuRegions {
    private final GpuRuntime runtime;
    private final String key;
    private final int device;
    private final AtomicInteger nextRegion = new AtomicInteger();
    private final Map<Integer, Local> locals = new ConcurrentHashMap<>();
    private final Map<String, GpuMemoryDescriptor> remotes = new ConcurrentHashMap<>();
    private final Map<String, PeerBuffer> opened = new ConcurrentHashMap<>();

    private record Local(DeviceBuffer buffer, GpuMemoryDescriptor descriptor) {
    }

    /** The regions of engine {@code key}, whose buffers live on {@code device}. */
    GpuRegions(GpuRuntime runtime, String key, int device) {
        this.runtime = runtime;
        this.key = key;
        this.device = device;
    }

    /** Allocates {@code size} zeroed bytes on the device, exports them for IPC and registers them. */
    MemoryRegion register(long size) {
        DeviceBuffer buffer = runtime.allocate(device, size);
        try {
            int id = nextRegion.getAndIncrement();
            GpuMemoryDescriptor descriptor = new GpuMemoryDescriptor(key, id, device, buffer.address(), size,
                    runtime.exportIpc(buffer));
            locals.put(id, new Local(buffer, descriptor));
            return new MemoryRegion(key, id, size, device);
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
    }

    /**
     * The device buffer behind a region this engine registered.
     *
     * @throws IllegalArgumentException if this engine did not register {@code local}
     */
    DeviceBuffer buffer(MemoryRegion local) {
        return local(local).buffer();
    }

    /**
     * The descriptor to send to the peer for a region this engine registered.
     *
     * @throws IllegalArgumentException if this engine did not register {@code local}
     */
    GpuMemoryDescriptor describe(MemoryRegion local) {
        return local(local).descriptor();
    }

    /** Registers a region the peer described; its IPC handle is opened by {@link #open}, when first needed. */
    MemoryRegion registerRemote(GpuMemoryDescriptor remote) {
        remotes.put(remoteKey(remote.engineKey(), remote.id()), remote);
        return new MemoryRegion(remote.engineKey(), remote.id(), remote.size(), remote.device());
    }

    /**
     * The peer's buffer behind {@code remote}, mapped here: its IPC handle is opened on the first call and
     * the mapping shared by every later one.
     *
     * @throws IllegalArgumentException if {@code remote} was not registered with {@link #registerRemote}
     */
    PeerBuffer open(MemoryRegion remote) {
        String remoteKey = remoteKey(remote.engineKey(), remote.id());
        GpuMemoryDescriptor theirs = remotes.get(remoteKey);
        if (theirs == null) {
            throw new IllegalArgumentException("remote region " + remote.id() + " of engine " + remote.engineKey()
                    + " is not registered; call registerRemote with the peer's descriptor first");
        }
        return opened.computeIfAbsent(remoteKey, k -> runtime.openIpc(theirs.ipcHandle(), device, theirs.size()));
    }

    /** Unmaps the peer's buffer behind {@code remote} if it was opened, and forgets its descriptor. */
    void forget(MemoryRegion remote) {
        String remoteKey = remoteKey(remote.engineKey(), remote.id());
        remotes.remove(remoteKey);
        PeerBuffer mapped = opened.remove(remoteKey);
        if (mapped != null) {
            mapped.close();
        }
    }

    int remoteCount() {
        return remotes.size();
    }

    int openCount() {
        return opened.size();
    }

    /**
     * Unmaps every peer buffer opened, then frees every buffer registered, a failure not stopping the others;
     * forgets both, then throws the first failure, if any.
     */
    void closeAll() {
        List<AutoCloseable> all = new ArrayList<>(opened.values());
        locals.values().forEach(l -> all.add(l.buffer()));
        try {
            GpuResourcePool.closeEach(all);
        } finally {
            opened.clear();
            locals.clear();
        }
    }

    private Local local(MemoryRegion region) {
        Local l = region.engineKey().equals(key) ? locals.get(region.id()) : null;
        if (l == null) {
            throw new IllegalArgumentException("region " + region.id() + " of engine " + region.engineKey()
                    + " was not registered with engine " + key);
        }
        return l;
    }

    private static String remoteKey(String engine, int id) {
        return engine + "#" + id;
    }
}
