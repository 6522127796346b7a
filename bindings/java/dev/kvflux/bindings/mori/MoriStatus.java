package dev.kvflux.bindings.mori;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.bindings.mori.internal.MoriNative;

/**
 * The native {@code TransferStatus} of one posted batch. {@link #code()} is MoRI's {@code Code()}: a
 * non-blocking query that may complete the status (on xGMI, nothing else ever does). Safe to query
 * from any thread. Close it once nobody will query it again; closing its engine closes it too.
 */
public final class MoriStatus extends EngineHandle implements TransferStatus {

    MoriStatus(MoriNative lib, MoriEngine engine, long handle) {
        super(lib, engine, handle);
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

    /** Releases the native status (a copy still in flight finishes first, inside the library). */
    @Override
    void release() {
        lib.statusRelease(handle);
    }

    @Override
    public String toString() {
        return "MoriStatus[0x" + Long.toHexString(handle) + (isClosed() ? ", released]" : "]");
    }
}
