package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.internal.Msgpack;
import dev.kvflux.bindings.mori.internal.MoriNative;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/**
 * A MoRI {@code IOEngine}: it owns backends, memory registrations, known remote engines and sessions.
 * Closing it destroys the native engine and everything still open on it; their handles are then
 * invalid, and closing them is a no-op.
 *
 * <p>Every method but {@link #waitAll} returns promptly. Calls after {@link #close} go to the library,
 * which reports the released handle as {@code KVFLUX_MORI_E_BAD_HANDLE}.
 */
public final class MoriEngine implements AutoCloseable {
    private final MoriNative lib;
    private final long handle;
    private final String key;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile PushMode pushMode = PushMode.OFF;

    MoriEngine(MoriNative lib, long handle, String key) {
        this.lib = lib;
        this.handle = handle;
        this.key = key;
    }

    public String key() {
        return key;
    }

    /** An xGMI backend with MoRI's defaults (64 streams, 64 events per device). */
    public MoriEngine createXgmiBackend() {
        return createXgmiBackend(64, 64);
    }

    /**
     * {@code XgmiBackendConfig(numStreams, numEvents)}.
     *
     * @throws MoriIoException over the real MoRI, where the GPU runtime sees no device: the runtime's own
     *     error ({@code cudaErrorInsufficientDriver}, {@code hipErrorNoDevice}) rather than MoRI's warning
     */
    public MoriEngine createXgmiBackend(int numStreams, int numEvents) {
        lib.createXgmiBackend(handle, numStreams, numEvents);
        return this;
    }

    /**
     * {@code RdmaBackendConfig(qpPerTransfer, postBatchSize, numWorkerThreads, pollCqMode, enableNotification)}.
     *
     * @throws MoriIoException {@code KVFLUX_MORI_E_UNSUPPORTED} over the real MoRI where its topology code would
     *     end the process ({@code exit(-1)}): RDMA devices present and ROCm SMI not loadable, or no GPU it can
     *     see (every NVIDIA host); see {@link MoriIo#checkRdmaBackend}
     */
    public MoriEngine createRdmaBackend(int qpPerTransfer, int postBatchSize, int numWorkerThreads, int pollCqMode,
            boolean enableNotification) {
        lib.createRdmaBackend(handle, qpPerTransfer, postBatchSize, numWorkerThreads, pollCqMode, enableNotification);
        return this;
    }

    /**
     * What this engine does with the batches it posts from now on; {@link PushMode#OFF} until set.
     *
     * @throws MoriIoException {@code KVFLUX_MORI_E_UNSUPPORTED} for {@link PushMode#TIMES} or {@link PushMode#ON}
     *     when the library cannot tell when a copy ends: a MoRI built without kvflux's patch, or a library built
     *     before push completion
     */
    public MoriEngine push(PushMode mode) {
        Objects.requireNonNull(mode, "mode");
        var calls = lib.push();
        if (calls.isEmpty()) {
            if (mode != PushMode.OFF) {
                throw new MoriIoException(MoriNative.E_UNSUPPORTED, MoriNative.errorName(MoriNative.E_UNSUPPORTED),
                        lib.library() + " has no push completion (kvflux_mori_engine_set_push); rebuild it from"
                                + " this version's bindings/native");
            }
        } else if (pushMode == PushMode.ON && mode != PushMode.ON) {
            // leaving ON: Java first, so that no batch the library posts without push becomes a pushed status
            PushMode before = pushMode;
            pushMode = mode;
            try {
                calls.get().setPush(handle, mode.value());
            } catch (RuntimeException e) {
                pushMode = before;
                throw e;
            }
            return this;
        } else {
            calls.get().setPush(handle, mode.value());
        }
        pushMode = mode;
        return this;
    }

    /** What this engine does with the batches it posts now. */
    public PushMode pushMode() {
        return pushMode;
    }

    /** This engine's {@code EngineDesc} in MoRI's msgpack layout, to send to peers. */
    public byte[] packDescriptor() {
        return lib.engineDescPack(handle);
    }

    /** Registers a peer from its packed {@code EngineDesc}. */
    public void registerRemoteEngine(byte[] packedEngineDesc) {
        lib.registerRemote(handle, Objects.requireNonNull(packedEngineDesc, "packedEngineDesc"));
    }

    public void deregisterRemoteEngine(byte[] packedEngineDesc) {
        lib.deregisterRemote(handle, Objects.requireNonNull(packedEngineDesc, "packedEngineDesc"));
    }

    /**
     * Registers {@code data} (its address and {@code byteSize()}) on {@code device} (-1 for host memory).
     * The segment must stay valid until the returned memory is closed.
     */
    public MoriMemory registerMemory(MemorySegment data, int device, MemoryLocation location) {
        Objects.requireNonNull(data, "data");
        Objects.requireNonNull(location, "location");
        if (!data.isNative()) {
            throw new IllegalArgumentException("only native memory can be registered; got a heap segment");
        }
        long mem = lib.memRegister(handle, data, data.byteSize(), device, location.value());
        return new MoriMemory(lib, this, mem, key, false);
    }

    /**
     * A peer's memory from its packed {@code MemoryDesc}, to be the remote side of a session.
     *
     * @throws IllegalStateException if msgpack-core (an optional dependency) is not available
     */
    public MoriMemory unpackMemory(byte[] packedMemoryDesc) {
        Objects.requireNonNull(packedMemoryDesc, "packedMemoryDesc");
        Msgpack.require("MoRI memory descriptors");
        long mem = lib.memUnpack(handle, packedMemoryDesc);
        return new MoriMemory(lib, this, mem, engineKeyOf(packedMemoryDesc), true);
    }

    /** A session from memory registered here to a peer's memory (or this engine's own). */
    public MoriSession createSession(MoriMemory local, MoriMemory remote) {
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(remote, "remote");
        return new MoriSession(lib, this, lib.sessionCreate(handle, local.handle(), remote.handle()), local, remote);
    }

    public long allocateTransferUid() {
        return lib.engineAllocateUid(handle);
    }

    /**
     * MoRI's {@code IOEngine::WaitAll}: see {@link dev.kvflux.bindings.TransferEngine#waitAll}. Null entries
     * are skipped, as MoRI skips null pointers. Blocks the calling thread up to {@code timeoutMs}
     * ({@code < 0}: until every status is terminal).
     */
    public StatusCode waitAll(List<MoriStatus> statuses, int timeoutMs) {
        long[] handles = new long[statuses.size()];
        for (int i = 0; i < handles.length; i++) {
            MoriStatus status = statuses.get(i);
            handles[i] = status == null ? 0 : status.handle();
        }
        return StatusCode.of(lib.waitAll(handle, handles, timeoutMs));
    }

    /** Destroys the engine and everything still open on it. Idempotent. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                lib.engineDestroy(handle);
            } finally {
                lib.push().ifPresent(calls -> calls.forgetEngine(handle));
            }
        }
    }

    boolean isClosed() {
        return closed.get();
    }

    long handle() {
        return handle;
    }

    /** A packed MemoryDesc's first field, its engine key; the library validates the rest. */
    private static String engineKeyOf(byte[] packed) {
        return DescriptorKey.of(packed);
    }

    /** The msgpack calls, in a class of their own so that nothing loads msgpack-core before the check. */
    private static final class DescriptorKey {
        private DescriptorKey() {
        }

        static String of(byte[] packed) {
            try (MessageUnpacker in = MessagePack.newDefaultUnpacker(packed)) {
                in.unpackArrayHeader();
                return in.unpackString();
            } catch (IOException | RuntimeException e) {
                throw new IllegalStateException("the library accepted a MemoryDesc whose engine key cannot be read", e);
            }
        }
    }

    @Override
    public String toString() {
        return "MoriEngine[" + key + (closed.get() ? ", closed]" : "]");
    }
}
