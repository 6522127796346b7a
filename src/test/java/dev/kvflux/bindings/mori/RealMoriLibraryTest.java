package dev.kvflux.bindings.mori;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.transfer.notify.KvRegion;
import dev.kvflux.transfer.notify.NotifyCodec;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/**
 * The FFM binding over the real MoRI IO ({@code libkvflux_mori.so} over {@code libmori_io.so}, built by
 * {@code bindings/native/mori/build.sh}), on a host without a GPU or an RDMA device, as CI runs it.
 *
 * <p>Runs when {@value #BUILD_PROPERTY} names a build.sh output directory and {@value #PLATFORM_PROPERTY}
 * its platform ({@code cuda} or {@code hip}); {@code .ci/run} builds both and sets them through the Maven
 * properties {@code kvflux.test.mori.cuda} and {@code kvflux.test.mori.hip}. Each platform runs in its own
 * test JVM: the two builds' libraries share their names and cannot both be loaded in one process.
 */
@Tag("mori-real")
class RealMoriLibraryTest {
    static final String BUILD_PROPERTY = "kvflux.test.mori.build";
    static final String PLATFORM_PROPERTY = "kvflux.test.mori.platform";

    private static MoriIo io;
    private static String platform;

    @BeforeAll
    static void loadTheRealLibrary() {
        String build = System.getProperty(BUILD_PROPERTY, "");
        platform = System.getProperty(PLATFORM_PROPERTY, "");
        assumeFalse(build.isBlank() || build.startsWith("${"), "no real MoRI build given: run"
                + " bindings/native/mori/build.sh --platform cuda|hip --out DIR and pass -Dkvflux.test.mori.cuda=DIR"
                + " or -Dkvflux.test.mori.hip=DIR to mvn, or export KVFLUX_TEST_MORI_CUDA / KVFLUX_TEST_MORI_HIP (.ci/run does)");
        Path dir = Path.of(build);
        if (platform.equals("cuda") && !loadable("libcuda.so.1")) {
            // No NVIDIA driver on this host: the build's link stub stands in for libcuda.so.1, so the libraries
            // load and the CUDA runtime reports the missing driver as an error.
            SymbolLookup.libraryLookup(dir.resolve("link-stub/libcuda.so.1"), Arena.global());
        }
        io = MoriIo.load(dir.resolve("lib/libkvflux_mori.so"));
    }

    private static boolean loadable(String name) {
        try {
            SymbolLookup.libraryLookup(name, Arena.global());
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    private static boolean hasRdmaDevices() {
        try (Stream<Path> devices = Files.list(Path.of("/sys/class/infiniband"))) {
            return devices.findAny().isPresent();
        } catch (IOException e) {
            return false;
        }
    }

    @AfterEach
    void everyHandleWasReleased() {
        assertThat(io.liveHandles()).as("handles open in the real shim after the test").hasValue(0);
    }

    @Test
    void theLibraryIsTheShimOverTheRealMoRI() {
        assertThat(io.implementation()).isEqualTo("mori");
        assertThat(io.simulatorControls()).isEmpty();
        assertThat(io.library()).endsWith("lib/libkvflux_mori.so");
    }

    @Test
    void theShimOverThePatchedMoRISetsTheCompletionHookSoAnEngineMayPushOrOnlyTime() {
        try (MoriEngine engine = io.createEngine("real-push", "127.0.0.1", 0)) {
            assertThat(engine.push(PushMode.ON).pushMode()).isEqualTo(PushMode.ON);
            assertThat(engine.push(PushMode.TIMES).pushMode()).isEqualTo(PushMode.TIMES);
            assertThat(engine.push(PushMode.OFF).pushMode()).isEqualTo(PushMode.OFF);
            assertThat(io.statusesAwaitingPush()).isZero();
        }
    }

    @Test
    void anEngineIsCreatedAndItsDescriptorHasMoRIsSixFields() throws IOException {
        try (MoriEngine engine = io.createEngine("real-desc", "10.1.2.3", 8123)) {
            assertThat(io.liveHandles()).hasValue(1);
            try (MessageUnpacker in = MessagePack.newDefaultUnpacker(engine.packDescriptor())) {
                assertThat(in.unpackArrayHeader()).isEqualTo(6);
                assertThat(in.unpackString()).isEqualTo("real-desc"); // key
                in.unpackString(); // nodeId
                in.unpackString(); // hostname
                assertThat(in.unpackString()).isEqualTo("10.1.2.3"); // host
                assertThat(in.unpackInt()).isEqualTo(8123); // port
                assertThat(in.unpackLong()).isEqualTo(ProcessHandle.current().pid()); // pid
                assertThat(in.hasNext()).isFalse();
            }
        }
    }

    @Test
    void aPeerEngineIsRegisteredFromItsPackedDescriptor() {
        try (MoriEngine a = io.createEngine("real-peer-a", "127.0.0.1", 0);
                MoriEngine b = io.createEngine("real-peer-b", "127.0.0.1", 0)) {
            a.registerRemoteEngine(b.packDescriptor());
            a.deregisterRemoteEngine(b.packDescriptor());
        }
    }

    @Test
    void hostMemoryDescriptorsArePackedAndUnpackedByMoRIsOwnMsgpackCode() throws IOException {
        try (Arena arena = Arena.ofConfined();
                MoriEngine owner = io.createEngine("real-mem-owner", "127.0.0.1", 0);
                MoriEngine peer = io.createEngine("real-mem-peer", "127.0.0.1", 0)) {
            MemorySegment buffer = arena.allocate(300);
            try (MoriMemory memory = owner.registerMemory(buffer, -1, MemoryLocation.CPU);
                    MoriMemory unpacked = peer.unpackMemory(memory.pack())) {
                byte[] packed = memory.pack();
                try (MessageUnpacker in = MessagePack.newDefaultUnpacker(packed)) {
                    assertThat(in.unpackArrayHeader()).isEqualTo(15);
                    assertThat(in.unpackString()).isEqualTo("real-mem-owner"); // engineKey
                    assertThat(in.unpackInt()).isEqualTo(memory.region().id()); // id
                    assertThat(in.unpackInt()).isEqualTo(-1); // deviceId
                    in.unpackString(); // deviceBusId
                    assertThat(in.unpackLong()).isEqualTo(buffer.address()); // data
                    assertThat(in.unpackLong()).isEqualTo(300); // size
                    assertThat(in.unpackInt()).isEqualTo(MemoryLocation.CPU.value()); // loc
                }
                assertThat(unpacked.isRemote()).isTrue();
                assertThat(unpacked.pack()).isEqualTo(packed);
                assertThat(unpacked.region()).isEqualTo(new MemoryRegion("real-mem-owner", memory.region().id(), 300, -1));
            }
        }
    }

    @Test
    void theHandshakesDescriptorsCrossTheNotifyChannelAndAreUnpackedByMoRIsOwnCode() {
        try (Arena arena = Arena.ofConfined();
                MoriEngine decode = io.createEngine("real-handshake-decode", "127.0.0.1", 0);
                MoriEngine prefill = io.createEngine("real-handshake-prefill", "127.0.0.1", 0)) {
            MemorySegment kv = arena.allocate(4 * 64);
            try (MoriMemory memory = decode.registerMemory(kv, -1, MemoryLocation.CPU)) {
                KvRegion region = new KvRegion("mori", decode.packDescriptor(), memory.pack(), 2, 64);
                NotifyMessage.RemoteBlocks sent = new NotifyMessage.RemoteBlocks("t", "t", List.of(1L), 0, 5, region);

                NotifyMessage.RemoteBlocks got = (NotifyMessage.RemoteBlocks) NotifyCodec.decode(NotifyCodec.encode(sent));
                prefill.registerRemoteEngine(got.region().engineDescriptor());
                try (MoriMemory remote = prefill.unpackMemory(got.region().memoryDescriptor())) {
                    assertThat(remote.region()).isEqualTo(memory.region());
                    assertThat(remote.pack()).isEqualTo(memory.pack());
                }
                prefill.deregisterRemoteEngine(got.region().engineDescriptor());
            }
        }
    }

    @Test
    void withoutAGpuTheXgmiBackendFailsWithTheRuntimesOwnError() {
        try (MoriEngine engine = io.createEngine("real-xgmi", "127.0.0.1", 0)) {
            MoriIoException error = catchThrowableOfType(MoriIoException.class, engine::createXgmiBackend);
            assumeTrue(error != null, "this host has a GPU: the xGMI backend was created");
            assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_BACKEND");
            assertThat(error.getMessage()).contains("kvflux_mori_engine_create_xgmi_backend", "sees none")
                    .contains(platform.equals("cuda") ? "cudaErrorInsufficientDriver" : "hipErrorNoDevice");
        }
    }

    @Test
    void withoutAnRdmaDeviceTheRdmaBackendFailsCleanly() {
        assumeFalse(hasRdmaDevices(), "this host has RDMA devices (/sys/class/infiniband)");
        try (MoriEngine engine = io.createEngine("real-rdma", "127.0.0.1", 0)) {
            MoriIoException error = catchThrowableOfType(MoriIoException.class,
                    () -> engine.createRdmaBackend(1, 1, 1, 0, false));
            assertThat(error).isNotNull();
            assertThat(error.getMessage()).contains("kvflux_mori_engine_create_rdma_backend").containsIgnoringCase("rdma");
        }
    }

    @Test
    void anRdmaBackendThatWouldEndTheProcessIsRefusedBeforeMoRIIsCalled(@TempDir Path sysfs) throws IOException {
        Files.createDirectory(sysfs.resolve("mlx5_0"));
        MoriIoException error = catchThrowableOfType(MoriIoException.class,
                () -> io.checkRdmaBackend(sysfs.toString(), sysfs.resolve("librocm_smi64.so.1").toString()));
        assertThat(error).isNotNull();
        assertThat(error.errorName()).isEqualTo("KVFLUX_MORI_E_UNSUPPORTED");
        assertThat(error.getMessage()).contains("mlx5_0", "exit(-1)", "Refused");
    }

    @Test
    void withoutRdmaDevicesMoRIsOwnRdmaCheckIsLeftToMoRI(@TempDir Path sysfs) {
        io.checkRdmaBackend(sysfs.toString(), sysfs.resolve("librocm_smi64.so.1").toString());
    }
}
