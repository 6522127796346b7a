package dev.kvflux.bindings.gpu;

import dev.kvflux.bindings.internal.Msgpack;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Objects;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/**
 * What a peer needs to write into a registered GPU buffer from another process: the owning engine's key,
 * the region's id, the device, the address and size, and the IPC handle. Packed as a msgpack array in the
 * order of MoRI's {@code MemoryDesc} (engineKey, id, deviceId, deviceBusId, data, size, loc, ipcHandle),
 * so the same bytes describe the region to either side.
 */
public record GpuMemoryDescriptor(String engineKey, int id, int device, long address, long size,
        IpcMemHandle ipcHandle) {

    /** MoRI's {@code MemoryLocationType::GPU}. */
    static final int LOCATION_GPU = 2;
    private static final int FIELDS = 8;
    private static final String WHAT = "GPU memory descriptors";

    public GpuMemoryDescriptor {
        Objects.requireNonNull(engineKey, "engineKey");
        Objects.requireNonNull(ipcHandle, "ipcHandle");
        if (size <= 0) {
            throw new IllegalArgumentException("a GPU memory descriptor's size must be positive, got " + size);
        }
    }

    /**
     * The descriptor as msgpack bytes.
     *
     * @throws IllegalStateException if msgpack-core (an optional dependency) is not available
     */
    public byte[] pack() {
        Msgpack.require(WHAT);
        return Codec.pack(this);
    }

    /**
     * A descriptor from {@link #pack()}'s bytes; extra trailing fields are ignored, as MoRI does.
     *
     * @throws IllegalArgumentException if the bytes are not such a descriptor, saying what was wrong
     * @throws IllegalStateException if msgpack-core (an optional dependency) is not available
     */
    public static GpuMemoryDescriptor unpack(byte[] bytes) {
        Msgpack.require(WHAT);
        return Codec.unpack(bytes);
    }

    /** The msgpack calls, in a class of their own so that nothing loads msgpack-core before the check. */
    private static final class Codec {
        private Codec() {
        }

        static byte[] pack(GpuMemoryDescriptor d) {
            try (MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
                out.packArrayHeader(FIELDS);
                out.packString(d.engineKey);
                out.packInt(d.id);
                out.packInt(d.device);
                out.packString("");
                out.packLong(d.address);
                out.packLong(d.size);
                out.packInt(LOCATION_GPU);
                byte[] handle = d.ipcHandle.bytes();
                out.packBinaryHeader(handle.length);
                out.writePayload(handle);
                return out.toByteArray();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        static GpuMemoryDescriptor unpack(byte[] bytes) {
            try (MessageUnpacker in = MessagePack.newDefaultUnpacker(bytes)) {
                int fields = in.unpackArrayHeader();
                if (fields < FIELDS) {
                    throw new IllegalArgumentException("GPU memory descriptor has " + fields + " fields, needs at least "
                            + FIELDS + " (engineKey, id, deviceId, deviceBusId, data, size, loc, ipcHandle);"
                            + " is the peer a GPU engine?");
                }
                String key = in.unpackString();
                int id = in.unpackInt();
                int device = in.unpackInt();
                in.unpackString();
                long address = in.unpackLong();
                long size = in.unpackLong();
                int location = in.unpackInt();
                if (location != LOCATION_GPU) {
                    throw new IllegalArgumentException("memory descriptor of " + key + " region " + id
                            + " is not GPU memory (location " + location + "); the GPU copy engine writes GPU memory only");
                }
                int handleBytes = in.unpackBinaryHeader();
                if (handleBytes != IpcMemHandle.SIZE) { // checked before reading: the length is the peer's
                    throw new IllegalArgumentException("memory descriptor of " + key + " region " + id + " has an IPC"
                            + " handle of " + handleBytes + " bytes; an IPC handle has " + IpcMemHandle.SIZE);
                }
                byte[] handle = in.readPayload(handleBytes);
                return new GpuMemoryDescriptor(key, id, device, address, size, new IpcMemHandle(handle));
            } catch (IOException | RuntimeException e) {
                if (e instanceof IllegalArgumentException iae) {
                    throw iae;
                }
                throw new IllegalArgumentException("not a GPU memory descriptor (" + e.getMessage()
                        + "); expected the msgpack array GpuMemoryDescriptor.pack() writes", e);
            }
        }
    }
}
