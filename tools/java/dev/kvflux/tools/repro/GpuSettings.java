package dev.kvflux.tools.repro;

import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuPlatform;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * How {@code kvflux repro}'s GPU backends ({@code mori}, {@code cuda}, {@code hip}) use the GPUs; the other
 * backends ignore it. Every value comes from a {@code kvflux repro} option.
 *
 * @param prefillGpu prefill's GPU ({@code --gpu})
 * @param decodeGpu decode's GPU ({@code --decode-gpu}); empty: see {@link #decodeGpu(int)}
 * @param forwardBytes bytes of scratch the stand-in forward pass writes on prefill's GPU before each layer's
 *     blocks ({@code --forward-bytes}), so that the GPU runs behind the posting as in a real prefill; 0: the
 *     GPU only fills the blocks
 * @param engine the {@code cuda} and {@code hip} backends' prefill engine: its stream pool
 *     ({@code --streams}), copy path ({@code --copy-path}, {@code --scatter-gather-threshold}) and stream
 *     progress ({@code --stream-progress})
 * @param processes {@code mori}: 1, both engines in this process; 2, decode's in a child process
 *     ({@code --processes})
 * @param platform {@code mori}: the GPU runtime ({@code --gpu-platform}); empty: CUDA if installed, else HIP
 */
public record GpuSettings(int prefillGpu, OptionalInt decodeGpu, long forwardBytes, GpuCopyEngine.Config engine,
                          int processes, Optional<GpuPlatform> platform) {

    /** Prefill on GPU 0, decode by {@link #decodeGpu(int)}, no scratch work, MoRI's pools, one process. */
    public static final GpuSettings DEFAULTS = new GpuSettings(0, OptionalInt.empty(), 0, GpuCopyEngine.Config.DEFAULT,
            1, Optional.empty());

    public GpuSettings {
        Objects.requireNonNull(decodeGpu, "decodeGpu");
        Objects.requireNonNull(engine, "engine");
        Objects.requireNonNull(platform, "platform");
        if (prefillGpu < 0 || decodeGpu.orElse(0) < 0) {
            throw new IllegalArgumentException("GPUs are numbered from 0, got prefill " + prefillGpu + ", decode "
                    + decodeGpu.orElse(0));
        }
        if (forwardBytes < 0) {
            throw new IllegalArgumentException("the stand-in forward pass writes 0 or more bytes, got " + forwardBytes);
        }
        if (processes != 1 && processes != 2) {
            throw new IllegalArgumentException("the mori backend runs in 1 or 2 processes, not " + processes);
        }
    }

    /**
     * Decode's GPU on a machine of {@code devices} GPUs: the one given, else GPU 1 where there are two or
     * more, else prefill's own (the {@code cuda} and {@code hip} backends then copy within one GPU).
     */
    public int decodeGpu(int devices) {
        return decodeGpu.orElse(devices >= 2 ? 1 : prefillGpu);
    }

    /** These settings with the prefill engine's shared stream progress on or off. */
    public GpuSettings withSharedStreamProgress(boolean shared) {
        return new GpuSettings(prefillGpu, decodeGpu, forwardBytes, engine.withSharedStreamProgress(shared), processes,
                platform);
    }
}
