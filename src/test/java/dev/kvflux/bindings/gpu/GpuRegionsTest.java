package dev.kvflux.bindings.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.MemoryRegion;
import org.junit.jupiter.api.Test;

/**
 * The engine's region bookkeeping where it needs no GPU: registering a peer's descriptor and refusing what
 * was never registered. No runtime is given, so any call that reached the GPU would fail; allocating,
 * exporting and opening handles are covered by the {@code gpu}-tagged tests.
 */
class GpuRegionsTest {
    private final GpuRegions regions = new GpuRegions(null, "prefill", 0);

    private static GpuMemoryDescriptor peer(int id) {
        return new GpuMemoryDescriptor("decode", id, 1, 0x7f00_0000_0000L, 4096, new IpcMemHandle(
                new byte[IpcMemHandle.SIZE]));
    }

    @Test
    void aPeersDescriptorRegistersAsThePeersRegion() {
        assertThat(regions.registerRemote(peer(3))).isEqualTo(new MemoryRegion("decode", 3, 4096, 1));
    }

    @Test
    void aRemoteRegionNotRegisteredIsRefusedSayingWhatToCallFirst() {
        regions.registerRemote(peer(3));
        assertThatThrownBy(() -> regions.open(new MemoryRegion("decode", 4, 4096, 1)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("remote region 4 of engine decode is not registered; call registerRemote with the"
                        + " peer's descriptor first");
    }

    @Test
    void aRegionOfAnotherEngineIsNotOneOfOursEvenWithAKnownId() {
        assertThatThrownBy(() -> regions.buffer(new MemoryRegion("decode", 0, 4096, 0)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("region 0 of engine decode was not registered with engine prefill");
        assertThatThrownBy(() -> regions.describe(new MemoryRegion("prefill", 0, 4096, 0)))
                .hasMessage("region 0 of engine prefill was not registered with engine prefill");
    }

    @Test
    void closingWithOnlyAPeersDescriptorRegisteredFreesNothing() {
        regions.registerRemote(peer(3));
        regions.closeAll(); // nothing was opened or allocated: no runtime call, so no failure without one
    }
}
