package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.mori.internal.MoriNative;

/**
 * The native {@code TransferStatus} of one posted batch. {@link #code()} is MoRI's {@code Code()}: a
 * non-blocking query that may complete the status (on xGMI, nothing else ever does, unless its engine pushes:
 * then the status is a {@link PushedMoriStatus}). Safe to query from any thread. Close it once nobody will query
 * it again; closing its engine closes it too.
 */
public sealed class MoriStatus extends EngineHandle implements TransferStatus permits PushedMoriStatus {
    private volatile long copyEnd = UNKNOWN_TIME;
    private final long bytes;

    MoriStatus(MoriNative lib, MoriEngine engine, long handle, long bytes) {
        super(lib, engine, handle);
        this.bytes = bytes;
    }

    /** {@inheritDoc} The sum of the batch's block sizes as posted. */
    @Override
    public long bytes() {
        return bytes;
    }

    /**
     * {@inheritDoc}
     *
     * @throws MoriIoException ({@code KVFLUX_MORI_E_BAD_HANDLE}) once the status was released
     */
    @Override
    public StatusCode code() {
        return StatusCode.of(lib.statusCode(handle));
    }

    @Override
    public String message() {
        return lib.statusMessage(handle);
    }

    /**
     * {@inheritDoc}
     *
     * <p>Known on the simulator, which models it, and over the real MoRI for batches posted with
     * {@link PushMode#TIMES} or {@link PushMode#ON} (the time the host function behind the batch ran); kept once
     * known, so it stays readable after the status is closed.
     */
    @Override
    public long completedAtNanos() {
        long known = copyEnd;
        if (known != UNKNOWN_TIME || isClosed() || engine.isClosed()) {
            return known;
        }
        long end = lib.push().map(calls -> calls.copyEndNanos(handle)).orElse(UNKNOWN_TIME);
        if (end != UNKNOWN_TIME) {
            copyEnd = end;
        }
        return end;
    }

    /** Records the copies' end as a push reported it. */
    final void copiesEndedAt(long nanos) {
        copyEnd = nanos;
    }

    /** Releases the native status (a copy still in flight finishes first, inside the library). */
    @Override
    void release() {
        lib.statusRelease(handle);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[0x" + Long.toHexString(handle) + (isClosed() ? ", released]" : "]");
    }
}
