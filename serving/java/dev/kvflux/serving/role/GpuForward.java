package dev.kvflux.serving.role;

import dev.kvflux.bindings.EventState;
import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.bindings.gpu.GpuEvent;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.gpu.GpuStream;
import dev.kvflux.transfer.KvLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * Prefill's stand-in forward pass on its GPU, as {@code kvflux repro --backend cuda} runs it: on a compute stream of
 * its own, each layer's blocks are filled (one memset per block, every byte the block's {@link KvBytes#byteOf tag
 * byte}) and an event is recorded behind them. A layer is ready for its copies when the model's time for it has come
 * and its GPU event has completed, so a GPU slower than the model holds the copies back as a real forward pass
 * would. The events are the caller's to close once the transfer has ended.
 */
final class GpuForward implements AutoCloseable {
    private final GpuRuntime runtime;
    private final int device;
    private final long base;
    private final KvLayout.Rows layout;
    private final GpuStream stream;

    GpuForward(GpuRuntime runtime, int device, long base, KvLayout.Rows layout) {
        this.runtime = runtime;
        this.device = device;
        this.base = base;
        this.layout = layout;
        runtime.setDevice(device);
        this.stream = runtime.createStream(device);
    }

    /** Queues every layer's fill of {@code transferId}'s {@code blocks}; returns one GPU event per layer. */
    List<GpuEvent> write(String transferId, List<Long> blocks) {
        runtime.setDevice(device);
        long idHash = KvChecksum.idHash(transferId);
        List<GpuEvent> events = new ArrayList<>(layout.layers());
        try {
            for (int l = 0; l < layout.layers(); l++) {
                for (int i = 0; i < blocks.size(); i++) {
                    stream.memsetAsync(base + layout.offset(l, blocks.get(i)), KvBytes.byteOf(idHash, l, i),
                            layout.blockBytes());
                }
                GpuEvent event = runtime.createEvent(device, false);
                events.add(event);
                event.record(stream);
            }
            return events;
        } catch (RuntimeException e) {
            events.forEach(GpuEvent::close);
            throw e;
        }
    }

    /** Ready when both are: the model's time for the layer ({@code modelled}) and the GPU's work ({@code gpu}). */
    static LayerEvent both(LayerEvent modelled, LayerEvent gpu) {
        return () -> modelled.query() == EventState.READY ? gpu.query() : EventState.NOT_READY;
    }

    @Override
    public void close() {
        stream.close();
    }
}
