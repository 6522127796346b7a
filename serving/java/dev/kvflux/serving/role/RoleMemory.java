package dev.kvflux.serving.role;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.gpu.DeviceBuffer;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MemoryLocation;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.transfer.KvLayout;
import dev.kvflux.transfer.notify.KvRegion;
import java.lang.foreign.MemorySegment;

/**
 * A role's KV region registered with its engine: rows of the role's {@code --kv-blocks} blocks per layer, and,
 * where the engine's memory holds bytes, the bytes themselves ({@link KvBytes}). The simulated xGMI engine keeps no
 * bytes (its region is bookkeeping); the C simulator's region is host memory another process maps; a GPU copy
 * engine's is device memory on the role's GPU, filled on the GPU by prefill's forward pass ({@link GpuForward}) and
 * read back through host copies by decode's check.
 */
record RoleMemory(MemoryRegion region, KvLayout.Rows layout, KvBytes bytes, GpuForward forward, DeviceBuffer owned)
        implements AutoCloseable {

    /** The rows of a role of {@code blocks} blocks running {@code model}. */
    static KvLayout.Rows layout(ServingModel model, int blocks) {
        return new KvLayout.Rows(model.layers(), blocks, model.blockBytes());
    }

    /**
     * The rows of one rank of a role of {@code tp} ranks and {@code blocks} blocks, in TP pair {@code ranks}: one
     * shard of {@code 1 / links} of a block's bytes per row block, {@code links / tp} of them per block, so that the
     * rank holds its share of the heads of every block.
     */
    static KvLayout.Rows layout(ServingModel model, int blocks, dev.kvflux.transfer.TpRanks ranks, int tp) {
        long rowBlocks = (long) blocks * ranks.linksPerRank(tp);
        if (rowBlocks > ServingModel.ROW_BLOCKS) {
            throw new IllegalArgumentException("--kv-blocks " + blocks + " over " + ranks + " needs " + rowBlocks
                    + " shard blocks per rank, over the " + ServingModel.ROW_BLOCKS + " a row may hold");
        }
        return new KvLayout.Rows(model.layers(), (int) rowBlocks, ranks.shardBytes(model.blockBytes()));
    }

    /**
     * Registers the region with {@code engine} on {@code gpu} (where the engine runs on GPUs).
     *
     * @throws IllegalStateException if the engine's memory is not one the roles can keep KV in, or it cannot hold
     *     the region, saying what to do
     */
    static RoleMemory register(DescribedEngine engine, KvLayout.Rows layout, int gpu, GpuRuntime runtime) {
        long size = layout.regionBytes();
        try {
            return switch (engine) {
                case SimulatedXgmiEngine sim -> new RoleMemory(sim.registerMemory(size, gpu), layout, null, null, null);
                case NativeTransferEngine n when n.simulator().isPresent() -> {
                    MemoryRegion region = n.registerMemory(size, -1);
                    yield new RoleMemory(region, layout, new KvBytes(KvBytes.BlockIo.host(n.buffer(region)), layout),
                            null, null);
                }
                case NativeTransferEngine n -> {
                    if (runtime == null) {
                        throw new IllegalStateException("the roles over the real MoRI keep their KV in GPU memory they"
                                + " allocate: give the role a GPU runtime (gpuRuntime(...))");
                    }
                    runtime.setDevice(gpu);
                    DeviceBuffer buffer = runtime.allocate(gpu, size);
                    try {
                        MemoryRegion region = n.registerMemory(MemorySegment.ofAddress(buffer.address()).reinterpret(size),
                                gpu, MemoryLocation.GPU);
                        yield new RoleMemory(region, layout, new KvBytes(device(runtime, gpu, buffer), layout,
                                KvBytes.Pattern.BYTES), new GpuForward(runtime, gpu, buffer.address(), layout), buffer);
                    } catch (RuntimeException e) {
                        buffer.close();
                        throw e;
                    }
                }
                case GpuCopyEngine g -> {
                    MemoryRegion region = g.registerMemory(size, g.device());
                    DeviceBuffer buffer = g.buffer(region);
                    yield new RoleMemory(region, layout, new KvBytes(device(g.runtime(), g.device(), buffer), layout,
                            KvBytes.Pattern.BYTES), new GpuForward(g.runtime(), g.device(), buffer.address(), layout),
                            null);
                }
                default -> throw new IllegalStateException("the roles cannot keep their KV on backend '"
                        + engine.backend() + "'; run them with --backend sim-xgmi, native-sim, cuda, hip or mori");
            };
        } catch (RuntimeException e) {
            if (e instanceof IllegalStateException) {
                throw e;
            }
            throw new IllegalStateException("cannot register a KV region of " + size + " bytes (" + layout.layers()
                    + " layers x " + layout.rowBlocks() + " blocks x " + layout.blockBytes() + " bytes) with the "
                    + engine.backend() + " engine: " + e.getMessage() + "; lower --kv-blocks", e);
        }
    }

    /** What decode sends prefill with every block list: its engine's and this region's descriptors and rows. */
    KvRegion describe(DescribedEngine engine) {
        return new KvRegion(engine.backend(), engine.engineDescriptor(), engine.memoryDescriptor(region),
                layout.rowBlocks(), layout.blockBytes());
    }

    private static KvBytes.BlockIo device(GpuRuntime runtime, int gpu, DeviceBuffer buffer) {
        long base = buffer.address();
        return new KvBytes.BlockIo() {
            @Override
            public void write(long offset, MemorySegment block) {
                runtime.setDevice(gpu);
                runtime.copyFromHost(block, base + offset);
            }

            @Override
            public void read(long offset, MemorySegment into) {
                runtime.setDevice(gpu);
                runtime.copyToHost(base + offset, into);
            }
        };
    }

    /**
     * Closes the forward pass's stream, if there is one, and frees the GPU memory the role allocated for MoRI; an
     * engine's own region goes with the engine.
     */
    @Override
    public void close() {
        if (forward != null) {
            forward.close();
        }
        if (owned != null) {
            owned.close();
        }
    }
}
