package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.kvflux.bindings.EventState;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The binding on a real GPU (tag {@code gpu}: excluded by default; run with
 * {@code mvn test -Dkvflux.excludedGroups= -Dgroups=gpu} on a GPU machine).
 */
@Tag("gpu")
class GpuDeviceTest {
    private static GpuRuntime runtime;

    @BeforeAll
    static void gpu() {
        try {
            runtime = GpuRuntime.load();
            assumeTrue(runtime.deviceCount() > 0, "no GPU visible to " + runtime);
        } catch (GpuLibraryNotFoundException | GpuException e) {
            assumeTrue(false, "no usable GPU runtime here: " + e.getMessage());
        }
    }

    @Test
    void aPolledEventTurnsReadyOnceItsWorkIsDone() {
        try (DeviceBuffer buffer = runtime.allocate(0, 1 << 20);
                GpuStream stream = runtime.createStream(0);
                GpuEvent event = runtime.createEvent(0, false)) {
            stream.memsetAsync(buffer.address(), 5, buffer.size());
            event.record(stream);
            event.synchronize();
            assertThat(event.query()).isEqualTo(EventState.READY);
        }
    }

    @Test
    void aPushedLayerEventCompletesWithoutPolling() {
        assumeTrue(runtime.supportsHostFunctions(), runtime + " has no host functions");
        try (DeviceBuffer buffer = runtime.allocate(0, 1 << 20);
                GpuStream stream = runtime.createStream(0);
                GpuEvent event = runtime.createEvent(0, false)) {
            stream.memsetAsync(buffer.address(), 5, buffer.size());
            PushedLayerEvent pushed = PushedLayerEvent.recordOn(stream, event);
            pushed.ready().block(Duration.ofSeconds(10));
            assertThat(pushed.query()).isEqualTo(EventState.READY);
        }
    }

    @Test
    void bytesFilledOnTheDeviceReadBackOnTheHost() {
        try (DeviceBuffer buffer = runtime.allocate(0, 4096);
                GpuStream stream = runtime.createStream(0);
                Arena arena = Arena.ofConfined()) {
            stream.memsetAsync(buffer.address(), 0x5A, 4096);
            stream.synchronize();
            MemorySegment host = arena.allocate(4096);
            runtime.copyToHost(buffer.address(), host);
            assertThat(host.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 0x5A);
            assertThat(host.get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) 0x5A);
        }
    }

    @Test
    void anOutOfRangeDeviceNamesTheRuntimesError() {
        assertThatThrownBy(() -> runtime.setDevice(runtime.deviceCount() + 7))
                .isInstanceOf(GpuException.class)
                .hasMessageContaining("ErrorInvalidDevice");
    }

    @Test
    void anEngineRefusesToRegisterMemoryOnAnotherDevice() {
        try (GpuCopyEngine engine = GpuCopyEngine.open(runtime, "test", 0, new GpuCopyEngine.Config(1, 1))) {
            assertThatThrownBy(() -> engine.registerMemory(4096, 3))
                    .hasMessageContaining("works on device 0, not 3");
        }
    }
}
