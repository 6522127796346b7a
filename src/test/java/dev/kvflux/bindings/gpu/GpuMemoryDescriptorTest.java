package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

class GpuMemoryDescriptorTest {
    private static IpcMemHandle handle() {
        byte[] bytes = new byte[IpcMemHandle.SIZE];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (i * 7 + 1);
        }
        return new IpcMemHandle(bytes);
    }

    @Test
    void aDescriptorRoundTripsThroughItsBytes() {
        GpuMemoryDescriptor d = new GpuMemoryDescriptor("decode-1", 3, 1, 0x7f00_0000_0000L, 990_904_320L, handle());
        assertThat(GpuMemoryDescriptor.unpack(d.pack())).isEqualTo(d);
    }

    @Test
    void fieldsFollowMorisMemoryDescOrder() throws IOException {
        byte[] bytes = new GpuMemoryDescriptor("d", 3, 1, 4096, 8192, handle()).pack();
        try (MessageUnpacker in = MessagePack.newDefaultUnpacker(bytes)) {
            assertThat(in.unpackArrayHeader()).isEqualTo(8);
            assertThat(in.unpackString()).isEqualTo("d");
            assertThat(in.unpackInt()).isEqualTo(3);
            assertThat(in.unpackInt()).isEqualTo(1);
            assertThat(in.unpackString()).isEmpty();
            assertThat(in.unpackLong()).isEqualTo(4096);
            assertThat(in.unpackLong()).isEqualTo(8192);
            assertThat(in.unpackInt()).isEqualTo(GpuMemoryDescriptor.LOCATION_GPU);
            assertThat(in.readPayload(in.unpackBinaryHeader())).isEqualTo(handle().bytes());
        }
    }

    @Test
    void aShortArrayIsRefusedWithTheFieldsItNeeds() throws IOException {
        byte[] bytes;
        try (MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
            out.packArrayHeader(2).packString("d").packInt(1);
            bytes = out.toByteArray();
        }
        assertThatThrownBy(() -> GpuMemoryDescriptor.unpack(bytes))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("has 2 fields, needs at least 8");
    }

    @Test
    void garbageIsRefusedClearly() {
        assertThatThrownBy(() -> GpuMemoryDescriptor.unpack(new byte[] {1, 2, 3}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a GPU memory descriptor");
    }

    @Test
    void anIpcHandleOfTheWrongSizeIsRefused() {
        assertThatThrownBy(() -> new IpcMemHandle(new byte[12]))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("has 64 bytes, got 12");
    }

    @Test
    void aHandleLengthOtherThanAnIpcHandlesIsRefusedBeforeAnythingIsAllocated() throws IOException {
        byte[] bytes;
        try (MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
            out.packArrayHeader(8).packString("d").packInt(3).packInt(1).packString("")
                    .packLong(4096).packLong(8192).packInt(GpuMemoryDescriptor.LOCATION_GPU)
                    .packBinaryHeader(Integer.MAX_VALUE);
            bytes = out.toByteArray();
        }
        assertThatThrownBy(() -> GpuMemoryDescriptor.unpack(bytes))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("IPC handle of 2147483647 bytes; an IPC handle has 64");
    }

    @Test
    void withoutMsgpackCorePackingSaysWhichDependencyToAdd() throws Exception {
        // kvflux-bindings alone, as an application that left out its optional msgpack-core sees it.
        URL bindings = GpuMemoryDescriptor.class.getProtectionDomain().getCodeSource().getLocation();
        try (URLClassLoader alone = new URLClassLoader(new URL[] {bindings}, ClassLoader.getPlatformClassLoader())) {
            Class<?> handleType = alone.loadClass(IpcMemHandle.class.getName());
            Class<?> descriptorType = alone.loadClass(GpuMemoryDescriptor.class.getName());
            Object ipcHandle = handleType.getConstructor(byte[].class).newInstance((Object) handle().bytes());
            Object descriptor = descriptorType.getConstructor(String.class, int.class, int.class, long.class,
                    long.class, handleType).newInstance("d", 3, 1, 4096L, 8192L, ipcHandle);

            assertThatThrownBy(() -> descriptorType.getMethod("pack").invoke(descriptor))
                    .isInstanceOf(InvocationTargetException.class)
                    .cause()
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageStartingWith("GPU memory descriptors are msgpack, and msgpack-core is not available")
                    .hasMessageContaining("org.msgpack:msgpack-core");
        }
    }
}
