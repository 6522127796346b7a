package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.kvflux.bindings.MemoryRegion;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import dev.kvflux.testing.NoLiveSimHandles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/** Descriptors packed through the C ABI have MoRI's msgpack layout, field by field, and round-trip. */
@ExtendWith(NoLiveSimHandles.class)
class MoriDescriptorTest {

    @Test
    void engineDescriptorHasMoRIsSixFieldsInOrder() throws IOException {
        try (MoriEngine engine = MoriIo.simulator().createEngine("desc-engine", "10.1.2.3", 8000)) {
            try (MessageUnpacker in = MessagePack.newDefaultUnpacker(engine.packDescriptor())) {
                assertThat(in.unpackArrayHeader()).isEqualTo(6);
                assertThat(in.unpackString()).isEqualTo("desc-engine"); // key
                assertThat(in.getNextFormat()).isEqualTo(MessageFormat.FIXSTR);
                in.unpackString(); // nodeId
                in.unpackString(); // hostname
                assertThat(in.unpackString()).isEqualTo("10.1.2.3"); // host
                assertThat(in.getNextFormat()).isEqualTo(MessageFormat.UINT16); // smallest form of 8000
                assertThat(in.unpackInt()).isEqualTo(8000); // port
                assertThat(in.unpackLong()).isEqualTo(ProcessHandle.current().pid()); // pid
                assertThat(in.hasNext()).isFalse();
            }
        }
    }

    @Test
    void memoryDescriptorHasMoRIsFifteenFieldsInOrder() throws IOException {
        try (Arena arena = Arena.ofConfined();
                MoriEngine engine = MoriIo.simulator().createEngine("desc-memory", "127.0.0.1", 0)) {
            MemorySegment buffer = arena.allocate(300);
            try (MoriMemory memory = engine.registerMemory(buffer, -1, MemoryLocation.CPU);
                    MessageUnpacker in = MessagePack.newDefaultUnpacker(memory.pack())) {
                assertThat(in.unpackArrayHeader()).isEqualTo(15);
                assertThat(in.unpackString()).isEqualTo("desc-memory"); // engineKey
                assertThat(in.unpackInt()).isEqualTo(memory.region().id()); // id
                assertThat(in.getNextFormat()).isEqualTo(MessageFormat.NEGFIXINT);
                assertThat(in.unpackInt()).isEqualTo(-1); // deviceId
                assertThat(in.unpackString()).isEmpty(); // deviceBusId
                assertThat(in.unpackLong()).isEqualTo(buffer.address()); // data
                assertThat(in.getNextFormat()).isEqualTo(MessageFormat.UINT16); // 300, smallest form
                assertThat(in.unpackLong()).isEqualTo(300); // size
                assertThat(in.unpackInt()).isEqualTo(MemoryLocation.CPU.value()); // loc
                assertThat(in.unpackBinaryHeader()).isEqualTo(64); // ipcHandle
                in.readPayload(64);
                assertThat(in.unpackInt()).isEqualTo(-1); // numaNode
                assertThat(in.unpackLong()).isZero(); // ipcOffset
                assertThat(in.unpackBinaryHeader()).isEqualTo(64); // fabricHandle
                in.readPayload(64);
                assertThat(in.unpackInt()).isEqualTo(-1); // vpodId
                assertThat(in.unpackString()).isEmpty(); // vpodPpodId
                assertThat(in.unpackLong()).isZero(); // fabricOffset
                assertThat(in.unpackLong()).isZero(); // fabricAllocSize
                assertThat(in.hasNext()).isFalse();
            }
        }
    }

    @Test
    void memoryDescriptorRoundTripsThroughUnpackAndPack() {
        try (Arena arena = Arena.ofConfined();
                MoriEngine owner = MoriIo.simulator().createEngine("desc-owner", "127.0.0.1", 0);
                MoriEngine peer = MoriIo.simulator().createEngine("desc-peer", "127.0.0.1", 0);
                MoriMemory memory = owner.registerMemory(arena.allocate(4096), -1, MemoryLocation.CPU);
                MoriMemory unpacked = peer.unpackMemory(memory.pack())) {
            assertThat(unpacked.pack()).isEqualTo(memory.pack());
            assertThat(unpacked.region()).isEqualTo(new MemoryRegion("desc-owner", memory.region().id(), 4096, -1));
            assertThat(unpacked.isRemote()).isTrue();
        }
    }

    @Test
    void unpackKeepsDefaultsForMissingTrailingFieldsAndIgnoresExtraOnes() throws IOException {
        try (Arena arena = Arena.ofConfined();
                MoriEngine engine = MoriIo.simulator().createEngine("desc-short", "127.0.0.1", 0);
                MoriMemory memory = engine.registerMemory(arena.allocate(64), -1, MemoryLocation.CPU)) {
            byte[] full = memory.pack();
            byte[] shortened = repack(full, 7);
            byte[] longer = repack(full, 17);
            try (MoriMemory fromShort = engine.unpackMemory(shortened);
                    MoriMemory fromLong = engine.unpackMemory(longer)) {
                assertThat(fromShort.pack()).isEqualTo(full); // the 8 missing fields are MoRI's defaults
                assertThat(fromLong.pack()).isEqualTo(full);
            }
        }
    }

    @Test
    void bytesThatAreNotADescriptorAreADecodeError() {
        try (MoriEngine engine = MoriIo.simulator().createEngine("desc-bad", "127.0.0.1", 0)) {
            MoriIoException error = catchThrowableOfType(MoriIoException.class,
                    () -> engine.unpackMemory(new byte[] {(byte) 0x93, 0x01, 0x02}));
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_DECODE");
            assertThat(error.getMessage()).contains("kvflux_mori_mem_unpack", "MemoryDesc", "expected a string");
        }
    }

    /** The first {@code fields} fields of a packed array (fields > length: padded with extra nils). */
    private static byte[] repack(byte[] packed, int fields) throws IOException {
        try (MessageUnpacker in = MessagePack.newDefaultUnpacker(packed);
                MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
            int n = in.unpackArrayHeader();
            out.packArrayHeader(fields);
            for (int i = 0; i < fields; i++) {
                if (i < n) {
                    out.packValue(in.unpackValue());
                } else {
                    out.packNil();
                }
            }
            return out.toByteArray();
        }
    }
}
