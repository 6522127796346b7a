package dev.kvflux.tools.cli;

import dev.kvflux.bindings.DescribedEngine;
import dev.kvflux.transfer.TpRanks;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.gpu.GpuCopyEngine;
import dev.kvflux.bindings.gpu.GpuException;
import dev.kvflux.bindings.gpu.GpuLibraryNotFoundException;
import dev.kvflux.bindings.gpu.GpuPlatform;
import dev.kvflux.bindings.gpu.GpuRuntime;
import dev.kvflux.bindings.mori.MoriIoException;
import dev.kvflux.bindings.mori.MoriSimulator;
import dev.kvflux.bindings.mori.NativeTransferEngine;
import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.Fault;
import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.transfer.KvMode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Option;
import picocli.CommandLine;

/**
 * Which transfer engine a role keeps and moves its KV with ({@code @Mixin} of {@code prefill} and {@code decode}):
 * {@code --backend} (else the configuration's {@code engine.backend}) and {@code --gpu}. {@code sim-xgmi}, the
 * default, is the simulated xGMI engine in Java; {@code native-sim} the C simulator behind kvflux's MoRI ABI,
 * through FFM, whose host memory the other role's process maps, as xGMI maps a GPU's through IPC; {@code cuda}
 * and {@code hip} kvflux's GPU copy engine, the KV in the GPU's memory; {@code mori} the real MoRI IO's xGMI backend,
 * the KV in GPU memory the role allocates and registers with it.
 */
public final class EngineOptions {
    /** The backends the roles run on, in the order the help lists them. */
    static final List<String> BACKENDS = List.of("sim-xgmi", "native-sim", "cuda", "hip", "mori");

    @Option(names = "--backend", paramLabel = "NAME",
            description = "The transfer engine: sim-xgmi (the simulated xGMI engine; default: engine.backend),"
                    + " native-sim (the C simulator through FFM; decode's KV in shared host memory), cuda or hip"
                    + " (kvflux's GPU copy engine, the KV on --gpu), mori (the real MoRI IO's xGMI backend through"
                    + " libkvflux_mori.so: -Dkvflux.mori.lib or KVFLUX_MORI_LIB; the KV on --gpu).")
    String backend;

    @Option(names = "--gpu", paramLabel = "N",
            description = "cuda, hip and mori: the GPU this role keeps its KV on (default 0; both roles may share one).")
    Integer gpu;

    @Option(names = "--kv-mode", paramLabel = "MODE",
            description = "Who moves the KV: write (prefill writes each layer into decode; default: kv.mode) or read"
                    + " (decode reads each layer from prefill, each layer's step after its reads). Prefill and decode"
                    + " must run the same mode.")
    String kvMode;

    @Option(names = "--tp", paramLabel = "N",
            description = "Tensor-parallel ranks this role runs, as threads of this process, each with its own engine,"
                    + " KV region, blocks and notify port (rank R on the notify port + R, or free ports when it is"
                    + " 0) and 1/N of the KV heads; a power of two up to 64 (default 1).")
    Integer tp;

    @Option(names = "--peer-tp", paramLabel = "N",
            description = "How many ranks the other role runs (default 1): the KV regions are cut into that pair's"
                    + " shards of heads, and a request from a peer of another TP size is refused with 400 tp_mismatch.")
    Integer peerTp;

    private GpuRuntime runtime;

    /** {@code --tp}, else 1. */
    int tp() {
        return tp != null ? tp : 1;
    }

    /** {@code --peer-tp}, else 1. */
    int peerTp() {
        return peerTp != null ? peerTp : 1;
    }

    /** {@code --kv-mode}, else the configuration's {@code kv.mode}. */
    KvMode kvMode(CommandLine cmd, KvfluxConfig config) {
        if (kvMode == null) {
            return config.engine().kvMode();
        }
        try {
            return KvMode.of(kvMode);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--kv-mode " + e.getMessage().replace("unknown KV mode ", ""));
        }
    }

    /** The backend named by {@code --backend}, else the configuration's. */
    String backend(KvfluxConfig config) {
        return backend != null ? backend.toLowerCase(Locale.ROOT) : config.engine().backend();
    }

    /** {@code --gpu}, else 0. */
    int gpu() {
        return gpu != null ? gpu : 0;
    }

    /**
     * Checks the names and numbers given before anything starts.
     *
     * @throws CommandLine.ParameterException one line, for an unknown backend or a GPU option it does not take
     */
    void check(CommandLine cmd, KvfluxConfig config) {
        String name = backend(config);
        if (!BACKENDS.contains(name)) {
            throw new CommandLine.ParameterException(cmd, "unknown backend '" + name + "'"
                    + (backend == null ? " (engine.backend)" : "") + "; the roles run on " + String.join(", ", BACKENDS));
        }
        for (String[] option : new String[][] {{"--tp", String.valueOf(tp())}, {"--peer-tp", String.valueOf(peerTp())}}) {
            try {
                TpRanks.check(option[0], Integer.parseInt(option[1]));
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(cmd, e.getMessage().replace("'s TP size", ""));
            }
        }
        if (gpu != null) {
            OptionChecks.inRange(cmd, "--gpu", gpu, 0, ReproGpuOptions.MAX_GPU);
            if (!name.equals("cuda") && !name.equals("hip") && !name.equals("mori")) {
                throw new CommandLine.ParameterException(cmd, "--gpu chooses the GPU of --backend cuda, hip or mori;"
                        + " backend " + name + " keeps its KV in host memory");
            }
        }
    }

    /**
     * Opens the role's engine, keyed {@code kvflux-ROLE-PID}, with the prefill's simulated faults ({@code fault}, as
     * {@code --inject-fault} gives them; null for none) and copy path.
     *
     * @throws IllegalStateException one line saying what is missing: no GPU, no GPU runtime, the C simulator
     *     not loadable
     */
    DescribedEngine open(KvfluxConfig config, String role, FaultSpec fault, boolean sgUnderLoad) {
        return openKeyed(config, "kvflux-" + role + "-" + ProcessHandle.current().pid(), fault, sgUnderLoad);
    }

    /**
     * Opens one engine per rank ({@code --tp}), as {@link #open} does, keyed {@code kvflux-ROLE-PID} for rank 0 and
     * {@code kvflux-ROLE-PID-rR} for rank R; a fault naming a rank ({@code @R}) goes to that rank's engine only.
     *
     * @throws IllegalStateException as {@link #open} does, with every engine already opened closed
     */
    List<DescribedEngine> openRanks(KvfluxConfig config, String role, FaultSpec fault, boolean sgUnderLoad) {
        String key = "kvflux-" + role + "-" + ProcessHandle.current().pid();
        if (fault != null && fault.rank() >= tp()) {
            throw new IllegalStateException("--inject-fault names rank " + fault.rank() + ", but this role runs "
                    + tp() + " rank(s)");
        }
        List<DescribedEngine> engines = new java.util.ArrayList<>(tp());
        try {
            for (int r = 0; r < tp(); r++) {
                FaultSpec own = fault != null && (fault.rank() < 0 || fault.rank() == r) ? fault : null;
                engines.add(openKeyed(config, r == 0 ? key : key + "-r" + r, own, sgUnderLoad));
            }
        } catch (RuntimeException e) {
            engines.reversed().forEach(DescribedEngine::close);
            throw e;
        }
        return List.copyOf(engines);
    }

    private DescribedEngine openKeyed(KvfluxConfig config, String key, FaultSpec fault, boolean sgUnderLoad) {
        String name = backend(config);
        return switch (name) {
            case "sim-xgmi" -> {
                SimulatedXgmiEngine.Builder b = SimulatedXgmiEngine.builder().engineKey(key)
                        .timing(config.engine().sim().timing())
                        .copyPath(sgUnderLoad ? CopyPath.SCATTER_GATHER : config.engine().sim().copyPath());
                if (fault != null) {
                    fault.apply(b);
                }
                yield b.build();
            }
            case "native-sim" -> {
                if (sgUnderLoad) {
                    throw new IllegalStateException("--sg-under-load is a copy path of the simulated xGMI engine;"
                            + " use --backend sim-xgmi for it");
                }
                NativeTransferEngine engine = nativeSim(key);
                if (fault != null) {
                    try {
                        fault.apply(engine.simulator().orElseThrow(), engine);
                    } catch (RuntimeException e) {
                        engine.close();
                        throw e;
                    }
                }
                yield engine;
            }
            case "cuda", "hip" -> {
                if (fault != null || sgUnderLoad) {
                    throw new IllegalStateException("--inject-fault and --sg-under-load act on the simulators only;"
                            + " backend " + name + " copies on a real GPU");
                }
                yield gpuEngine(GpuPlatform.named(name), key, gpu());
            }
            default -> {
                if (fault != null || sgUnderLoad) {
                    throw new IllegalStateException("--inject-fault and --sg-under-load act on the simulators only;"
                            + " backend mori copies on a real GPU");
                }
                yield mori(key, gpu());
            }
        };
    }

    /** The GPU runtime the last {@link #open} of {@code mori} loaded, which allocates the role's KV; else empty. */
    java.util.Optional<GpuRuntime> runtime() {
        return java.util.Optional.ofNullable(runtime);
    }

    /**
     * The real MoRI IO through {@code libkvflux_mori.so} ({@code -Dkvflux.mori.lib} or {@code KVFLUX_MORI_LIB}), with
     * an xGMI backend, the role's KV on {@code device} of the GPU runtime found first (CUDA, then HIP).
     */
    private NativeTransferEngine mori(String key, int device) {
        GpuRuntime found;
        try {
            found = GpuRuntime.load();
        } catch (GpuLibraryNotFoundException e) {
            throw new IllegalStateException("--backend mori needs a GPU runtime: " + e.getMessage());
        }
        int devices;
        try {
            devices = found.deviceCount();
        } catch (GpuException e) {
            throw new IllegalStateException("--backend mori found no usable GPU: " + e.getMessage());
        }
        if (device >= devices) {
            throw new IllegalStateException("--gpu " + device + " is not a GPU here: the " + found.platform().prefix()
                    + " runtime sees " + devices + (devices == 1 ? " GPU (GPU 0)" : " GPUs (0 to " + (devices - 1) + ")"));
        }
        found.setDevice(device);
        try {
            NativeTransferEngine engine = NativeTransferEngine.mori(key, "127.0.0.1", 0);
            runtime = found;
            return engine;
        } catch (MoriIoException | IllegalStateException | UnsatisfiedLinkError e) {
            throw new IllegalStateException("--backend mori cannot open MoRI IO's xGMI backend: " + e.getMessage());
        }
    }

    private static NativeTransferEngine nativeSim(String key) {
        try {
            return NativeTransferEngine.simulated(key);
        } catch (MoriIoException | IllegalStateException | UnsatisfiedLinkError e) {
            throw new IllegalStateException("cannot load the C simulator (native-sim): " + e.getMessage());
        }
    }

    private static GpuCopyEngine gpuEngine(GpuPlatform platform, String key, int device) {
        GpuRuntime runtime;
        try {
            String library = System.getProperty(GpuRuntime.LIBRARY_PROPERTY);
            runtime = library != null && !library.isBlank() ? GpuRuntime.load(platform, Path.of(library))
                    : GpuRuntime.load(platform);
        } catch (GpuLibraryNotFoundException e) {
            throw new IllegalStateException("--backend " + platform.prefix() + " needs a GPU runtime: " + e.getMessage());
        }
        int devices;
        try {
            devices = runtime.deviceCount();
        } catch (GpuException e) {
            throw new IllegalStateException("--backend " + platform.prefix() + " found no usable GPU: " + e.getMessage());
        }
        if (device >= devices) {
            throw new IllegalStateException("--gpu " + device + " is not a GPU here: the " + platform.prefix()
                    + " runtime sees " + devices + (devices == 1 ? " GPU (GPU 0)" : " GPUs (0 to " + (devices - 1) + ")"));
        }
        try {
            return GpuCopyEngine.open(runtime, key, device);
        } catch (GpuException e) {
            throw new IllegalStateException("cannot open the " + platform.prefix() + " copy engine on GPU " + device
                    + ": " + e.getMessage());
        }
    }

    /**
     * A role's simulated faults, as {@code --inject-fault} gives them: fail:EVERY:CODE, stall:EVERY, slow:EVERY:MILLIS,
     * each optionally followed by {@code @R} for rank R's engine only ({@code rank} -1: every rank's).
     */
    record FaultSpec(String kind, int every, StatusCode code, long millis, int rank) {
        FaultSpec(String kind, int every, StatusCode code, long millis) {
            this(kind, every, code, millis, -1);
        }

        /** The spec in {@code text}, or a one-line usage error. */
        static FaultSpec parse(String text, CommandLine cmd) {
            int at = text.lastIndexOf('@');
            if (at >= 0) {
                int rank;
                try {
                    rank = Integer.parseInt(text.substring(at + 1));
                    if (rank < 0 || rank >= TpRanks.MAX_TP) {
                        throw new NumberFormatException("outside 0.." + (TpRanks.MAX_TP - 1));
                    }
                } catch (NumberFormatException e) {
                    throw new CommandLine.ParameterException(cmd, "--inject-fault '" + text + "' names no rank after"
                            + " '@' (" + e.getMessage() + ")");
                }
                FaultSpec all = parse(text.substring(0, at), cmd);
                return new FaultSpec(all.kind, all.every, all.code, all.millis, rank);
            }
            String[] parts = text.split(":");
            try {
                int every = Integer.parseInt(parts[1]);
                if (every < 1) {
                    throw new NumberFormatException("must be at least 1");
                }
                return switch (parts[0]) {
                    case "fail" -> new FaultSpec("fail", every, StatusCode.valueOf(parts[2]), 0);
                    case "stall" -> new FaultSpec("stall", every, null, 0);
                    case "slow" -> new FaultSpec("slow", every, null, Long.parseLong(parts[2]));
                    default -> throw new IllegalArgumentException("unknown fault kind " + parts[0]);
                };
            } catch (RuntimeException e) {
                throw new CommandLine.ParameterException(cmd, "--inject-fault '" + text + "' is not fail:EVERY:CODE,"
                        + " stall:EVERY or slow:EVERY:MILLIS (" + e.getMessage() + ")");
            }
        }

        /** On the simulated xGMI engine: every EVERY-th of the first 1,000,000 batches. */
        void apply(SimulatedXgmiEngine.Builder engine) {
            for (long ordinal = every - 1; ordinal < 1_000_000; ordinal += every) {
                engine.fault(switch (kind) {
                    case "fail" -> Fault.fail(ordinal, Duration.ofMillis(1), code, "injected failure (chaos)");
                    case "stall" -> Fault.stall(ordinal);
                    default -> Fault.slow(ordinal, Duration.ofMillis(millis));
                });
            }
        }

        /** On the C simulator: every EVERY-th batch. */
        void apply(MoriSimulator sim, NativeTransferEngine engine) {
            switch (kind) {
                case "fail" -> sim.failEvery(engine.engine(), every, code, "injected failure (chaos)");
                case "stall" -> sim.hangEvery(engine.engine(), every);
                default -> sim.slowEvery(engine.engine(), every, Duration.ofMillis(millis));
            }
        }
    }
}
