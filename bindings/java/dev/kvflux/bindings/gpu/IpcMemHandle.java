package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.gpu.internal.RuntimeCalls;
import java.util.Arrays;
import java.util.HexFormat;

/** The 64 opaque bytes of a {@code hipIpcMemHandle_t} / {@code cudaIpcMemHandle_t}. */
public record IpcMemHandle(byte[] bytes) {
    /** Bytes in a handle. */
    public static final int SIZE = RuntimeCalls.Layouts.IPC_HANDLE_BYTES;

    public IpcMemHandle {
        if (bytes == null || bytes.length != SIZE) {
            throw new IllegalArgumentException("an IPC memory handle has " + SIZE + " bytes, got "
                    + (bytes == null ? "none" : bytes.length) + "; pass the handle exactly as the exporter sent it");
        }
        bytes = bytes.clone();
    }

    @Override
    public byte[] bytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof IpcMemHandle other && Arrays.equals(bytes, other.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    @Override
    public String toString() {
        return "IpcMemHandle[" + HexFormat.of().formatHex(bytes, 0, 8) + "…]";
    }
}
